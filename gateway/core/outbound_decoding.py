"""Response bodies decoded inside the outbound guard, under a cap on the DECODED size and on the
compression ratio. httpx would otherwise decode ``Content-Encoding`` after the transport counted the
wire bytes, so a 1 MB gzip page could grow into 1 GB in the gateway's memory. The guard asks only for
the encodings it decodes itself (gzip, deflate), decodes them in bounded steps (never more than
``STEP`` bytes out of one call) and removes ``Content-Encoding`` so nothing downstream decodes again;
a response in any other encoding is refused rather than handed on undecoded."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import httpx

ACCEPT_ENCODING = "gzip, deflate"
STEP = 64 * 1024
RATIO_FLOOR = 1024 * 1024  # below a mebibyte decoded any ratio passes: a small page of blanks compresses well
MAX_LAYERS = 2


class OutboundUnreadable(httpx.TransportError):
    """A response body the guard will not hand on (an encoding it does not decode, a corrupt stream)."""

    def describe(self, what: str) -> str:
        return f"{what} cannot be read: {self}"


class OutboundTooLarge(OutboundUnreadable):
    """A response body passed the transport's size or ratio cap; reading it stopped there."""

    def __init__(self, cap: int, declared: int | None, request: httpx.Request, *, ratio: float | None = None) -> None:
        self.cap, self.declared, self.ratio = cap, declared, ratio
        message = (f"the response decompresses more than {ratio:g} times" if ratio is not None
                   else f"the response is larger than the limit of {cap} bytes")
        super().__init__(message, request=request)

    def describe(self, what: str) -> str:
        if self.ratio is not None:
            return (f"{what} decompresses more than {self.ratio:g} times its size on the wire "
                    "(a compression bomb?); the limit is SWITCHBOARD_OUTBOUND_MAX_COMPRESSION_RATIO")
        if self.declared is not None:
            return f"{what} is {self.declared} bytes; the limit is {self.cap}"
        return f"{what} is larger than the limit of {self.cap} bytes (decoded)"


@dataclass(frozen=True)
class BodyLimits:
    max_bytes: int
    max_ratio: float = 100.0


class _Inflater:
    """One zlib layer; ``deflate`` is the zlib format by the RFC but raw deflate in the wild: the first
    chunk decides."""

    def __init__(self, encoding: str) -> None:
        self._gzip = encoding in ("gzip", "x-gzip")
        self._raw_fallback = not self._gzip
        self._inflate = zlib.decompressobj(zlib.MAX_WBITS | 16 if self._gzip else zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        pending = data
        while True:
            if self._inflate.eof:
                return  # trailing bytes after the stream end are ignored, as httpx does
            try:
                out = self._inflate.decompress(pending, STEP)
            except zlib.error as exc:
                if not self._raw_fallback:
                    raise ValueError(f"corrupt {'gzip' if self._gzip else 'deflate'} stream: {exc}") from None
                self._raw_fallback = False
                self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
                continue
            self._raw_fallback = False
            pending = self._inflate.unconsumed_tail
            if out:
                yield out
            if not pending and len(out) < STEP:
                return


def encodings(response: httpx.Response) -> list[str]:
    """The response's content codings in the order they were applied (identity left out)."""
    values = [v.strip().lower() for v in response.headers.get("content-encoding", "").split(",")]
    return [v for v in values if v and v != "identity"]


def _layers(data: bytes, layers: list[_Inflater]) -> Iterator[bytes]:
    if not layers:
        yield data
        return
    for piece in layers[0].feed(data):
        yield from _layers(piece, layers[1:])


class DecodedStream(httpx.AsyncByteStream):
    """The body, decoded, counted on the wire and decoded; ``OutboundTooLarge`` past either cap."""

    def __init__(self, inner: httpx.AsyncByteStream, codings: list[str], limits: BodyLimits,
                 request: httpx.Request) -> None:
        self._inner, self._limits, self._request = inner, limits, request
        self._layers = [_Inflater(coding) for coding in reversed(codings)]  # the last applied comes off first
        self._decoded = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        wire = 0
        async for chunk in self._inner:
            wire += len(chunk)
            if wire > self._limits.max_bytes:
                raise OutboundTooLarge(self._limits.max_bytes, None, self._request)
            for piece in self._checked(chunk, wire):
                yield piece

    def _checked(self, chunk: bytes, wire: int) -> Iterator[bytes]:
        cap, ratio = self._limits.max_bytes, self._limits.max_ratio
        try:
            for piece in _layers(chunk, self._layers):
                self._decoded += len(piece)
                if self._decoded > cap:
                    raise OutboundTooLarge(cap, None, self._request)
                if self._decoded > RATIO_FLOOR and self._decoded > wire * ratio:
                    raise OutboundTooLarge(cap, None, self._request, ratio=ratio)
                yield piece
        except ValueError as exc:
            raise OutboundUnreadable(str(exc), request=self._request) from None

    async def aclose(self) -> None:
        await self._inner.aclose()


def decoded(response: httpx.Response, limits: BodyLimits, request: httpx.Request) -> None:
    """Make ``response`` carry its decoded, capped body, with no ``Content-Encoding`` left to decode."""
    codings = encodings(response)
    unknown = [c for c in codings if c not in ("gzip", "x-gzip", "deflate")]
    if unknown or len(codings) > MAX_LAYERS:
        raise OutboundUnreadable(f"content encoding {', '.join(codings)!r} is not accepted "
                                 f"(the guard decodes {ACCEPT_ENCODING})", request=request)
    assert isinstance(response.stream, httpx.AsyncByteStream)
    response.stream = DecodedStream(response.stream, codings, limits, request)
    if codings:
        del response.headers["content-encoding"]
        response.headers.pop("content-length", None)

"""The one guarded way out for calls the gateway makes on an operator's or a user's behalf (website
crawls, data injection, the HTTP reranker). ``GuardedTransport`` is the guard itself, an httpx
transport: every request it sends, each redirect hop included, is checked against the outbound policy
and sent to the very address that was checked, and a response body is decoded by the guard itself and
cut off at a cap on its decoded size and compression ratio (``outbound_decoding``).
``GuardedClient`` rides on it and adds redirects it follows itself (each hop through the transport),
a time cap per try, and retries: timeouts, connection errors, 429 and 5xx are retried with
exponential backoff (429 honours ``Retry-After`` up to a cap), other 4xx are not. Code that cannot
import the gateway (``rag_core``) is handed a ``GuardedTransport``."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from urllib.parse import urljoin, urlsplit

import httpx

from gateway.core.errors import GatewayError
from gateway.core.outbound import OutboundPolicy, OutboundRefused, pinned, shown
from gateway.core.outbound_decoding import ACCEPT_ENCODING, BodyLimits, OutboundTooLarge, OutboundUnreadable, decoded

REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_RETRY_AFTER_S = 30.0


class FetchFailed(GatewayError):
    """A fetch that did not produce a usable page; ``reason`` says why, for the operator."""

    def __init__(self, url: str, reason: str, status: int | None = None) -> None:
        super().__init__(f"{shown(url)}: {reason}")
        self.url = url
        self.reason = reason
        self.status = status


class FetchTooLarge(FetchFailed):
    """The body passed the size cap; nothing of it is kept."""


class FetchRefused(FetchFailed):
    """The caller does not want this content type (the body was not read) or redirect target (not requested)."""


class _Retryable(Exception):
    def __init__(self, reason: str, status: int | None = None, wait_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.wait_s = wait_s


class OutboundBlocked(httpx.TransportError):
    """The transport did not send a request: its URL (a redirect hop's, perhaps) fails the policy."""

    def __init__(self, refusal: OutboundRefused, request: httpx.Request) -> None:
        super().__init__(refusal.message, request=request)
        self.refusal = refusal


class GuardedTransport(httpx.AsyncBaseTransport):
    def __init__(self, policy: OutboundPolicy, max_bytes: int, max_ratio: float = 100.0,
                 keep_alive: bool = False) -> None:
        self.policy = policy
        self.max_bytes = max_bytes
        self.limits = BodyLimits(max_bytes, max_ratio)
        # A pinned request's URL holds the checked IP address, so a kept-alive connection could carry a
        # request for another name on that IP without its certificate being checked: no keep-alive, unless
        # every request of this transport is for one URL's host (``keep_alive``: an MCP source's session).
        limits = httpx.Limits(max_keepalive_connections=8 if keep_alive else 0)
        self._inner = httpx.AsyncHTTPTransport(limits=limits)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        try:
            addresses = await self.policy.check(url)  # before anything is sent to it
        except OutboundRefused as exc:
            raise OutboundBlocked(exc, request) from exc
        target = pinned(url, addresses)
        headers = httpx.Headers(request.headers)
        headers["Accept-Encoding"] = ACCEPT_ENCODING  # only what the guard decodes under its caps
        sent = httpx.Request(request.method, target.url, headers=headers, stream=request.stream,
                             extensions={**request.extensions, **target.extensions})
        response = await self._inner.handle_async_request(sent)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await response.aclose()
            raise OutboundTooLarge(self.max_bytes, int(declared), request)
        try:
            decoded(response, self.limits, request)
        except OutboundUnreadable:
            await response.aclose()
            raise
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass(frozen=True)
class FetchLimits:
    timeout_s: float = 15.0
    max_bytes: int = 5 * 1024 * 1024  # decoded
    max_ratio: float = 100.0  # decoded size over size on the wire, past the first mebibyte
    max_redirects: int = 5
    retries: int = 2
    backoff_s: float = 0.5


@dataclass(frozen=True)
class FetchedResponse:
    url: str
    status: int
    content_type: str
    headers: dict[str, str]
    body: bytes
    redirects: tuple[str, ...]


@dataclass(frozen=True)
class _Hop:
    method: str
    url: str
    content: bytes | None
    headers: dict[str, str]

    def redirected(self, url: str, status: int) -> _Hop:
        dropped = set() if _origin(url) == _origin(self.url) else {"authorization", "cookie"}  # not for another site
        if status == 303 or (status in (301, 302) and self.method == "POST"):
            dropped |= {"content-type", "content-length"}
            method, content = ("HEAD" if self.method == "HEAD" else "GET"), None
        else:
            method, content = self.method, self.content
        return _Hop(method, url, content, {k: v for k, v in self.headers.items() if k.lower() not in dropped})


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port


def _retry_after(value: str | None) -> float | None:
    try:
        return min(max(float(value), 0.0), MAX_RETRY_AFTER_S) if value else None
    except ValueError:
        return None


class GuardedClient:
    def __init__(
        self, policy: OutboundPolicy, limits: FetchLimits | None = None, *,
        user_agent: str = "SwitchboardBot/1.0 (+knowledge base crawler)",
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep, subject: str = "the page",
    ) -> None:
        self.policy = policy
        self.subject = subject  # what a body is called in a failure's reason
        self.limits = limits or FetchLimits()
        self.user_agent = user_agent
        self._sleep = sleep
        # No cookies: one site's cookies must never ride along to another.
        self._http = httpx.AsyncClient(
            transport=GuardedTransport(policy, self.limits.max_bytes, self.limits.max_ratio), follow_redirects=False,
            timeout=self.limits.timeout_s, trust_env=False,
            cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def get(self, url: str, *, accept: Callable[[str], bool] | None = None,
                  follow: Callable[[str], bool] | None = None) -> FetchedResponse:
        """The page at ``url`` after redirects. ``OutboundRefused`` for a URL or hop the policy forbids,
        ``FetchRefused`` for a content type ``accept`` declines or a redirect target ``follow`` declines
        (that target is never requested), ``FetchTooLarge``, else ``FetchFailed``."""
        return await self.request("GET", url, accept=accept, follow=follow)

    async def request(
        self, method: str, url: str, *, content: bytes | None = None, headers: dict[str, str] | None = None,
        accept: Callable[[str], bool] | None = None, follow: Callable[[str], bool] | None = None,
    ) -> FetchedResponse:
        """``get`` for any method. A 303, or a 301/302 after a POST, is followed with a GET and no body
        (as browsers do); 307 and 308 repeat the method and body at the new address."""
        last: _Retryable | None = None
        tries = self.limits.retries + 1
        for attempt in range(tries):
            if last is not None:
                backoff = self.limits.backoff_s * 2 ** (attempt - 1)
                await self._sleep(last.wait_s if last.wait_s is not None else backoff)
            try:
                async with asyncio.timeout(self.limits.timeout_s):
                    return await self._follow(_Hop(method, url, content, headers or {}), accept, follow)
            except OutboundBlocked as exc:
                raise exc.refusal from None
            except OutboundTooLarge as exc:
                raise FetchTooLarge(url, exc.describe(self.subject)) from None
            except OutboundUnreadable as exc:
                raise FetchFailed(url, exc.describe(self.subject)) from None
            except httpx.RemoteProtocolError as exc:
                if "location header" in str(exc).lower():  # httpx will not read it (e.g. 0177.0.0.1): not followed
                    raise OutboundRefused(f"redirect refused: {exc}") from None
                last = _Retryable(f"connection failed: {exc.__class__.__name__}")
            except TimeoutError:
                last = _Retryable(f"timed out after {self.limits.timeout_s:g} s")
            except httpx.ConnectError as exc:
                if isinstance(exc.__cause__ or exc.__context__, ssl.SSLCertVerificationError):
                    # asking again would meet the same certificate
                    raise FetchFailed(url, f"the TLS certificate was refused: {exc}") from None
                last = _Retryable(f"connection failed: {exc.__class__.__name__}")
            except httpx.TransportError as exc:
                last = _Retryable(f"connection failed: {exc.__class__.__name__}")
            except _Retryable as exc:
                last = exc
        assert last is not None
        raise FetchFailed(url, f"{last.reason} after {tries} tries", last.status)

    async def _follow(self, hop: _Hop, accept: Callable[[str], bool] | None,
                      follow: Callable[[str], bool] | None = None) -> FetchedResponse:
        url, hops = hop.url, []
        for _ in range(self.limits.max_redirects + 1):
            current = hop.url
            await self._parsable(current)
            headers = {**hop.headers, "User-Agent": self.user_agent}
            async with self._http.stream(hop.method, current, content=hop.content, headers=headers) as resp:
                location = resp.headers.get("location")
                if resp.status_code in REDIRECTS and location:
                    target = urljoin(current, location)
                    if follow is not None and not follow(target):
                        raise FetchRefused(current, f"redirected to {target}, which is not followed")
                    hop = hop.redirected(target, resp.status_code)
                    hops.append(hop.url)
                    continue
                if resp.status_code == 429 or resp.status_code >= 500:
                    raise _Retryable(f"HTTP {resp.status_code}", resp.status_code,
                                     _retry_after(resp.headers.get("retry-after")) if resp.status_code == 429 else None)
                if resp.status_code >= 400:
                    raise FetchFailed(current, f"HTTP {resp.status_code}", resp.status_code)
                content_type = resp.headers.get("content-type", "").split(";")[0].strip().lower()
                if accept is not None and not accept(content_type):
                    raise FetchRefused(current, f"content type {content_type or 'unknown'} is not fetched")
                body = await self._read(current, resp)
                return FetchedResponse(current, resp.status_code, content_type, dict(resp.headers), body, tuple(hops))
        raise FetchFailed(url, f"more than {self.limits.max_redirects} redirects")

    async def _parsable(self, url: str) -> None:
        try:
            httpx.URL(url)
        except httpx.InvalidURL as exc:  # e.g. 0177.0.0.1, which httpx will not read but a resolver would
            await self.policy.check(url)  # names the forbidden address it spells, if it spells one
            raise OutboundRefused(f"outbound URL is not valid: {exc}") from None

    async def _read(self, url: str, resp: httpx.Response) -> bytes:
        try:
            return b"".join([chunk async for chunk in resp.aiter_bytes()])  # capped by the transport
        except OutboundTooLarge as exc:
            raise FetchTooLarge(url, exc.describe(self.subject)) from None
        except OutboundUnreadable as exc:
            raise FetchFailed(url, exc.describe(self.subject)) from None

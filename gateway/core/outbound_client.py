"""One guarded HTTP client for fetches the gateway makes on its own (website crawls, and any
other outbound call that adopts it): every request and every redirect hop is checked against the
outbound policy and sent to the very address that was checked; bodies are streamed and cut off
at a size cap; time is capped per try; timeouts, connection errors, 429 and 5xx are retried with
exponential backoff (429 honours ``Retry-After`` up to a cap), other 4xx are not."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from urllib.parse import urljoin

import httpx

from gateway.core.errors import GatewayError
from gateway.core.outbound import OutboundPolicy, pinned

REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_RETRY_AFTER_S = 30.0


class FetchFailed(GatewayError):
    """A fetch that did not produce a usable page; ``reason`` says why, for the operator."""

    def __init__(self, url: str, reason: str, status: int | None = None) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason
        self.status = status


class FetchTooLarge(FetchFailed):
    """The body passed the size cap; nothing of it is kept."""


class FetchRefused(FetchFailed):
    """The caller does not want this content type; the body was not read."""


class _Retryable(Exception):
    def __init__(self, reason: str, status: int | None = None, wait_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.wait_s = wait_s


@dataclass(frozen=True)
class FetchLimits:
    timeout_s: float = 15.0
    max_bytes: int = 5 * 1024 * 1024
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


def _retry_after(value: str | None) -> float | None:
    try:
        return min(max(float(value), 0.0), MAX_RETRY_AFTER_S) if value else None
    except ValueError:
        return None


class GuardedClient:
    def __init__(
        self, policy: OutboundPolicy, limits: FetchLimits | None = None, *,
        user_agent: str = "SwitchboardBot/1.0 (+knowledge base crawler)",
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.policy = policy
        self.limits = limits or FetchLimits()
        self.user_agent = user_agent
        self._sleep = sleep
        # A pinned request's URL holds the checked IP address, so a kept-alive connection could carry a
        # request for another name on that IP without its certificate being checked: no keep-alive.
        # No cookies either: one site's cookies must never ride along to another.
        self._http = httpx.AsyncClient(
            follow_redirects=False, timeout=self.limits.timeout_s, trust_env=False,
            limits=httpx.Limits(max_keepalive_connections=0),
            cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def get(self, url: str, *, accept: Callable[[str], bool] | None = None) -> FetchedResponse:
        """The page at ``url`` after redirects. ``OutboundRefused`` for a URL or hop the policy forbids,
        ``FetchRefused`` for a content type ``accept`` declines, ``FetchTooLarge``, else ``FetchFailed``."""
        last: _Retryable | None = None
        tries = self.limits.retries + 1
        for attempt in range(tries):
            if last is not None:
                backoff = self.limits.backoff_s * 2 ** (attempt - 1)
                await self._sleep(last.wait_s if last.wait_s is not None else backoff)
            try:
                async with asyncio.timeout(self.limits.timeout_s):
                    return await self._follow(url, accept)
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

    async def _follow(self, url: str, accept: Callable[[str], bool] | None) -> FetchedResponse:
        current, hops = url, []
        for _ in range(self.limits.max_redirects + 1):
            addresses = await self.policy.check(current)  # each hop, before anything is sent to it
            request = pinned(current, addresses)
            headers = {**request.headers, "User-Agent": self.user_agent}
            async with self._http.stream("GET", request.url, headers=headers, extensions=request.extensions) as resp:
                location = resp.headers.get("location")
                if resp.status_code in REDIRECTS and location:
                    current = urljoin(current, location)
                    hops.append(current)
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

    async def _read(self, url: str, resp: httpx.Response) -> bytes:
        cap = self.limits.max_bytes
        declared = resp.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            raise FetchTooLarge(url, f"the page is {int(declared)} bytes; the limit is {cap}")
        chunks, size = [], 0
        async for chunk in resp.aiter_bytes():
            size += len(chunk)
            if size > cap:
                raise FetchTooLarge(url, f"the page is larger than the limit of {cap} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

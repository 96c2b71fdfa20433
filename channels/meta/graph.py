"""Meta's Graph API over plain HTTP (httpx), one client per kind: the calls the three kinds make.

Not ``pywa`` (or another SDK): its webhook server and handler callbacks answer inside the request,
while our webhook only queues and the inbox answers later; and WhatsApp, Messenger and Instagram send
through the same few Graph calls, which one small client covers for all three. The token travels in
the ``Authorization`` header, never in a URL. A Graph error (``{"error": {"message", "code", …}}``)
leaves as the channel error tree with Meta's message and code.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from channels.errors import ChannelRateLimited, ChannelRejected, ChannelUnavailable
from gateway.channel import Settings

__all__ = ["Graph", "GraphRefused"]

log = logging.getLogger(__name__)
# Graph's throttling codes: app, user, page and WhatsApp pair/account rate limits
THROTTLED = frozenset({4, 17, 32, 613, 80007, 130429, 131048, 131056})


class GraphRefused(ChannelRejected):
    """Meta refused the call for good; ``code`` is Graph's error code (131047: outside the 24-hour window)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


def _error(what: str, response: httpx.Response) -> Exception:
    try:
        error = response.json().get("error") or {}
    except ValueError:
        error = {}
    code = error.get("code") if isinstance(error.get("code"), int) else None
    text = str(error.get("message") or response.reason_phrase or "no message")
    details = (error.get("error_data") or {}).get("details") if isinstance(error.get("error_data"), dict) else None
    detail = f"Meta {what}: HTTP {response.status_code}" + (f" ({code})" if code is not None else "") + f" {text}"
    if details:
        detail += f": {details}"
    if response.status_code == 429 or code in THROTTLED:
        after = response.headers.get("Retry-After")
        return ChannelRateLimited(detail, retry_after_s=float(after) if after and after.isdigit() else None)
    if response.status_code >= 500 or error.get("is_transient"):
        return ChannelUnavailable(detail)
    return GraphRefused(detail, code)


class Graph:
    def __init__(self, settings: Settings) -> None:
        self.base = settings.meta_api_base.rstrip("/")
        self._http = httpx.AsyncClient(timeout=15)

    async def close(self) -> None:
        await self._http.aclose()

    async def call(self, method: str, path: str, token: str, *, json: dict | None = None,
                   params: dict[str, str] | None = None, what: str | None = None) -> dict[str, Any]:
        """The JSON answer of ``method {base}/{path}``; ``ChannelRejected`` / ``ChannelUnavailable`` /
        ``ChannelRateLimited`` otherwise."""
        what = what or path.rsplit("/", 1)[-1]
        try:
            response = await self._http.request(method, f"{self.base}/{path.lstrip('/')}", json=json, params=params,
                                                headers={"Authorization": f"Bearer {token}"})
        except httpx.HTTPError as exc:
            raise ChannelUnavailable(f"Meta {what}: {type(exc).__name__}: {exc}") from exc
        log.info("meta %s %s: HTTP %s", method, what, response.status_code)
        if response.status_code >= 400:
            raise _error(what, response)
        try:
            answer = response.json()
        except ValueError as exc:
            raise ChannelUnavailable(f"Meta {what}: not JSON (HTTP {response.status_code})") from exc
        return answer if isinstance(answer, dict) else {"data": answer}

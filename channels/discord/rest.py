"""Discord's REST API over plain HTTP (httpx): the few calls a connection makes.

The bot token travels as ``Authorization: Bot <token>``; an interaction's follow-up needs none (its
token is in the path). A Discord error (``{"code", "message"}``) leaves as the channel error tree with
Discord's message and code; a 429 carries the ``retry_after`` Discord asks for (seconds, in the body
and the ``Retry-After`` header).
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from channels.errors import ChannelRateLimited, ChannelRejected, ChannelUnavailable
from gateway.channel import Settings

__all__ = ["DiscordRefused", "DiscordREST"]

log = logging.getLogger(__name__)


class DiscordRefused(ChannelRejected):
    """Discord refused the call for good; ``code`` is Discord's JSON error code (160004: a thread exists)."""

    def __init__(self, message: str, code: int | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


def _retry_after(response: httpx.Response, body: dict) -> float | None:
    after = body.get("retry_after")
    if isinstance(after, int | float):
        return float(after)
    header = response.headers.get("Retry-After")
    try:
        return float(header) if header else None
    except ValueError:
        return None


def _error(what: str, response: httpx.Response) -> Exception:
    try:
        body = response.json()
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    code = body.get("code") if isinstance(body.get("code"), int) else None
    text = str(body.get("message") or response.reason_phrase or "no message")
    detail = f"Discord {what}: HTTP {response.status_code}" + (f" ({code})" if code else "") + f" {text}"
    if response.status_code == 429:
        return ChannelRateLimited(detail, retry_after_s=_retry_after(response, body))
    if response.status_code >= 500:
        return ChannelUnavailable(detail)
    return DiscordRefused(detail, code, response.status_code)


class DiscordREST:
    def __init__(self, settings: Settings) -> None:
        self.base = settings.discord_api_base.rstrip("/")
        self._http = httpx.AsyncClient(timeout=15)

    async def close(self) -> None:
        await self._http.aclose()

    async def call(self, method: str, path: str, token: str | None, *, json: Any = None,
                   what: str | None = None) -> Any:
        """The JSON answer of ``method {base}{path}`` (None for a 204); the channel error tree otherwise."""
        what = what or path
        headers = {"Authorization": f"Bot {token}"} if token else {}
        try:
            response = await self._http.request(method, f"{self.base}{path}", json=json, headers=headers)
        except httpx.HTTPError as exc:
            raise ChannelUnavailable(f"Discord {what}: {type(exc).__name__}: {exc}") from exc
        log.info("discord %s %s: HTTP %s", method, what, response.status_code)
        if response.status_code >= 400:
            raise _error(what, response)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise ChannelUnavailable(f"Discord {what}: not JSON (HTTP {response.status_code})") from exc

"""The Bot Connector service: the app's token (client credentials) and the activities a reply sends.

The token is asked of the token URL (``SWITCHBOARD_TEAMS_TOKEN_URL``; a single-tenant bot's own
tenant in place of ``botframework.com``) with the app id and password, scope the Bot Framework's,
and kept in this process until five minutes before it expires; a 401 from the connector drops it. A
reply is ``POST {serviceUrl}/v3/conversations/{conversation}/activities/{activity}`` with it, a typing
indicator the same without the activity id. Errors leave as the channel error tree with Microsoft's
message (a 429 with its ``Retry-After``).
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from channels.errors import ChannelRateLimited, ChannelRejected, ChannelUnavailable
from gateway.channel import Connection, Settings

__all__ = ["Connector", "TokenRefusedByMicrosoft", "Where"]

log = logging.getLogger(__name__)

SCOPE = "https://api.botframework.com/.default"
EARLY_S = 300  # a kept token is asked again this long before it expires


class TokenRefusedByMicrosoft(ChannelRejected):
    """The token URL refused the app id and password (``invalid_client``, an unknown app, a wrong tenant)."""


@dataclass(frozen=True)
class Where:
    """The conversation a reply goes to: the connector the activity came from, the activity answered, and
    the two sides of it (the bot, ``28:<app id>``, and the person), which a reply names the other way round."""

    service_url: str
    conversation_id: str
    activity_id: str | None
    bot_id: str | None = None
    user_id: str | None = None

    def addressed(self, activity: dict[str, Any]) -> dict[str, Any]:
        """``activity`` with the conversation, its sender (the bot), its recipient and what it replies to."""
        out = {**activity, "conversation": {"id": self.conversation_id}}
        if self.bot_id:
            out["from"] = {"id": self.bot_id}
        if self.user_id:
            out["recipient"] = {"id": self.user_id}
        if self.activity_id:
            out["replyToId"] = self.activity_id
        return out


def _detail(what: str, response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = {}
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):  # the connector: {"error": {"code", "message"}}
        text = f"{error.get('code') or ''} {error.get('message') or ''}".strip()
    else:  # the token URL: {"error": "invalid_client", "error_description": "AADSTS7000215: ..."}
        text = str(body.get("error_description") or error or "") if isinstance(body, dict) else ""
    return f"Microsoft {what}: HTTP {response.status_code} {text or response.reason_phrase}".rstrip()


def _error(what: str, response: httpx.Response) -> Exception:
    detail = _detail(what, response)
    if response.status_code == 429:
        after = response.headers.get("Retry-After", "")
        return ChannelRateLimited(detail, retry_after_s=float(after) if after.isdigit() else None)
    if response.status_code >= 500:
        return ChannelUnavailable(detail)
    return ChannelRejected(detail)


class Connector:
    def __init__(self, settings: Settings) -> None:
        self.token_url = settings.teams_token_url
        self._http = httpx.AsyncClient(timeout=15)
        self._tokens: dict[str, tuple[str, float]] = {}  # (url, app, password digest) -> (token, expires at)

    async def close(self) -> None:
        await self._http.aclose()

    def token_url_for(self, connection: Connection) -> str:
        tenant = connection.secret("tenant_id").strip()
        return self.token_url.replace("/botframework.com/", f"/{quote(tenant, safe='')}/") if tenant else self.token_url

    def _cache_key(self, connection: Connection) -> str:
        digest = hashlib.sha256(connection.secret("app_password").encode()).hexdigest()
        return f"{self.token_url_for(connection)} {connection.secret('app_id')} {digest}"

    async def fresh_token(self, connection: Connection) -> str:
        """A token asked of the token URL now (the check on save), kept for the replies after it."""
        try:
            response = await self._http.post(self.token_url_for(connection), data={
                "grant_type": "client_credentials", "client_id": connection.secret("app_id"),
                "client_secret": connection.secret("app_password"), "scope": SCOPE})
        except httpx.HTTPError as exc:
            raise ChannelUnavailable(f"Microsoft token: {type(exc).__name__}: {exc}") from exc
        log.info("teams token for connection %s: HTTP %s", connection.id, response.status_code)
        if response.status_code in (400, 401, 403):
            raise TokenRefusedByMicrosoft(_detail("token", response))
        if response.status_code >= 400:
            raise _error("token", response)
        try:
            answer = response.json()
            token, lifetime = str(answer["access_token"]), float(answer.get("expires_in", 3600))
        except (ValueError, KeyError, TypeError) as exc:
            raise ChannelUnavailable("Microsoft token: the answer carried no access_token") from exc
        self._tokens[self._cache_key(connection)] = (token, time.monotonic() + lifetime - EARLY_S)
        return token

    async def token(self, connection: Connection) -> str:
        kept = self._tokens.get(self._cache_key(connection))
        if kept is not None and time.monotonic() < kept[1]:
            return kept[0]
        return await self.fresh_token(connection)

    async def send(self, connection: Connection, where: Where, activity: dict[str, Any], *, what: str) -> str:
        """Post ``activity`` to the conversation (as a reply to ``where.activity_id`` when there is one);
        the id the connector gave it."""
        path = f"v3/conversations/{quote(where.conversation_id, safe='')}/activities"
        if where.activity_id:
            path += f"/{quote(where.activity_id, safe='')}"
        token = await self.token(connection)
        try:
            response = await self._http.post(f"{where.service_url.rstrip('/')}/{path}", json=where.addressed(activity),
                                             headers={"Authorization": f"Bearer {token}"})
        except httpx.HTTPError as exc:
            raise ChannelUnavailable(f"Microsoft {what}: {type(exc).__name__}: {exc}") from exc
        log.info("teams %s for connection %s: HTTP %s", what, connection.id, response.status_code)
        if response.status_code in (401, 403):
            self._tokens.pop(self._cache_key(connection), None)  # revoked or rotated: ask again next time
        if response.status_code >= 400:
            raise _error(what, response)
        try:
            answer = response.json()
        except ValueError:
            answer = {}
        return str(answer.get("id", "")) if isinstance(answer, dict) else ""

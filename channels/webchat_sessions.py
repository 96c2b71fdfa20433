"""Web-chat sessions: an id and a bearer token per browser, the token stored only as a hash."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from gateway.channel import NotFound, RedisStore, Unauthorized

SESSION_TTL_S = 90 * 24 * 3600


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class WebSession:
    id: str
    persona_id: str

    @property
    def identity(self) -> str:
        return f"web:{self.id}"


class WebSessions:
    def __init__(self, store: RedisStore) -> None:
        self.store = store

    def _key(self, session_id: str) -> str:
        return self.store.key("webchat", "session", session_id)

    async def create(self) -> tuple[WebSession, str]:
        session_id = secrets.token_hex(16)
        token = secrets.token_urlsafe(32)
        persona = await self.store.resolve_persona(f"web:{session_id}")
        await self.store.redis.hset(
            self._key(session_id), mapping={"token": _digest(token), "persona_id": persona.id}
        )
        await self.store.redis.expire(self._key(session_id), SESSION_TTL_S)
        return WebSession(session_id, persona.id), token

    async def authenticate(self, session_id: str, token: str | None) -> WebSession:
        raw = {}
        if len(session_id) <= 64:
            # Read and slide the expiry in one round trip (EXPIRE on a missing key does nothing).
            pipe = self.store.redis.pipeline(transaction=False)
            pipe.hgetall(self._key(session_id))
            pipe.expire(self._key(session_id), SESSION_TTL_S)
            raw, _ = await pipe.execute()
        if not raw:
            raise NotFound("unknown chat session")
        if token is None:
            raise Unauthorized("missing session token")
        if not hmac.compare_digest(_digest(token), raw[b"token"].decode()):
            raise Unauthorized("wrong session token")
        return WebSession(session_id, raw[b"persona_id"].decode())

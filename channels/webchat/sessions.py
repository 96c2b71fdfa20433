"""Web-chat sessions: an id and a bearer token per browser, the token stored only as a hash.

A session is anonymous, so it, its identity (``web:<session id>``) and its persona (record, message
index, conversations, attributes) expire after ``SWITCHBOARD_WEBCHAT_IDLE_TTL_S`` unused; every use
starts that time again. (The messages themselves keep their own lifetime.)"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.channel import NotFound, RedisStore, Unauthorized

PERSONA_KEYS = ((), ("msgs",), ("convs",), ("attrs",))  # what an anonymous persona is made of


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def limit_key(session_id: str, token_digest: str) -> str:
    return f"{session_id}:{token_digest[:16]}"


@dataclass(frozen=True)
class WebSession:
    id: str
    persona_id: str
    token_digest: str = ""  # of the token that opened it

    @property
    def limit_key(self) -> str:
        """Whose messages the per-session rate limit counts: the session with the token tried (a stranger
        with a wrong token is counted apart from the visitor)."""
        return limit_key(self.id, self.token_digest)

    @property
    def identity(self) -> str:
        return f"web:{self.id}"


class WebSessions:
    def __init__(self, store: RedisStore, idle_ttl_s: int) -> None:
        self.store = store
        self.idle_ttl_s = idle_ttl_s

    def _key(self, session_id: str) -> str:
        return self.store.key("webchat", "session", session_id)

    def _identity_key(self, session_id: str) -> str:
        return self.store.key("identity", f"web:{session_id}")

    async def create(self) -> tuple[WebSession, str]:
        session_id = secrets.token_hex(16)
        token = secrets.token_urlsafe(32)
        persona = await self.store.resolve_persona(f"web:{session_id}")
        pipe = self.store.redis.pipeline(transaction=True)
        pipe.hset(self._key(session_id), mapping={"token": _digest(token), "persona_id": persona.id})
        pipe.expire(self._key(session_id), self.idle_ttl_s)
        pipe.expire(self._identity_key(session_id), self.idle_ttl_s)
        pipe.expire(self.store.key("persona", persona.id), self.idle_ttl_s)
        await pipe.execute()
        return WebSession(session_id, persona.id), token

    async def touch(self, session: WebSession) -> None:
        """Start the persona's idle time again (after a message, whose keys may be new)."""
        pipe = self.store.redis.pipeline(transaction=False)
        self.touch_into(pipe, session)
        await pipe.execute()

    def touch_into(self, pipe, session: WebSession) -> None:
        """Queue ``touch`` in ``pipe`` (a turn's closing round trip, after the turn's own writes)."""
        for parts in PERSONA_KEYS:
            pipe.expire(self.store.key("persona", session.persona_id, *parts), self.idle_ttl_s)

    async def authenticate(self, session_id: str, token: str | None,
                           also: Callable[[Any, str], Callable[[list], None]] | None = None) -> WebSession:
        """The session ``token`` opens. ``also(pipe, who)`` queues more in the same round trip (a
        message's rate limits; ``who`` names the session and the token tried, so a wrong token counts
        against its own key, never the visitor's) and returns a check for the answers, run once the
        session and token passed."""
        raw: dict = {}
        check = None
        if len(session_id) <= 64:
            # Read and slide the expiry in one round trip (EXPIRE on a missing key does nothing).
            pipe = self.store.redis.pipeline(transaction=True)
            pipe.hgetall(self._key(session_id))
            pipe.expire(self._key(session_id), self.idle_ttl_s)
            pipe.expire(self._identity_key(session_id), self.idle_ttl_s)
            if also is not None:
                check = also(pipe, limit_key(session_id, _digest(token or "")))
            answers = await pipe.execute()
            raw = answers[0]
        if not raw:
            raise NotFound("unknown chat session")
        if token is None:
            raise Unauthorized("missing session token")
        if not hmac.compare_digest(_digest(token), raw[b"token"].decode()):
            raise Unauthorized("wrong session token")
        if check is not None:
            check(answers)
        return WebSession(session_id, raw[b"persona_id"].decode(), raw[b"token"].decode())

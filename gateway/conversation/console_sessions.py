"""Console sign-in sessions, held in Redis so every replica knows them and sign-out ends them
everywhere. The cookie carries a random session id and its HMAC under a secret kept in Redis
(made once, shared by the replicas); each session has its own CSRF token, an idle expiry and an
absolute one."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import UTC, datetime

from pydantic import BaseModel

from gateway.conversation.store import RedisStore


class ConsoleSession(BaseModel):
    id: str
    username: str
    csrf: str
    created_at: datetime
    last_seen: datetime


class ConsoleSessions:
    def __init__(self, store: RedisStore, *, idle_s: int, absolute_s: int) -> None:
        self._store = store
        self._redis = store.redis
        self.idle_s = idle_s
        self.absolute_s = absolute_s
        self._secret: bytes | None = None

    async def _key_secret(self) -> bytes:
        if self._secret is None:
            key = self._store.key("console", "secret")
            await self._redis.set(key, secrets.token_hex(32), nx=True)
            self._secret = bytes.fromhex((await self._redis.get(key)).decode())
        return self._secret

    def _key(self, session_id: str) -> str:
        return self._store.key("console", "session", session_id)

    def _user_key(self, username: str) -> str:
        return self._store.key("console", "sessions-of", username)

    async def _sign(self, session_id: str) -> str:
        return hmac.new(await self._key_secret(), session_id.encode(), hashlib.sha256).hexdigest()

    async def open(self, username: str) -> tuple[str, ConsoleSession]:
        """A new session for ``username``: (cookie value, session)."""
        now = datetime.now(UTC)
        session = ConsoleSession(
            id=secrets.token_urlsafe(32), username=username, csrf=secrets.token_urlsafe(32),
            created_at=now, last_seen=now,
        )
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(self._key(session.id), session.model_dump_json(), ex=self.idle_s)
            pipe.sadd(self._user_key(username), session.id)
            pipe.expire(self._user_key(username), self.absolute_s)
            await pipe.execute()
        return f"{session.id}.{await self._sign(session.id)}", session

    async def _load(self, cookie: str | None) -> ConsoleSession | None:
        if not cookie or "." not in cookie:
            return None
        session_id, _, signature = cookie.rpartition(".")
        if not hmac.compare_digest(signature, await self._sign(session_id)):
            return None
        raw = await self._redis.get(self._key(session_id))
        return ConsoleSession.model_validate_json(raw) if raw else None

    async def resolve(self, cookie: str | None) -> ConsoleSession | None:
        """The live session behind a cookie; None when it is forged, signed out or expired."""
        session = await self._load(cookie)
        if session is None:
            return None
        now = datetime.now(UTC)
        if (now - session.created_at).total_seconds() > self.absolute_s:
            await self.close(cookie)
            return None
        session = session.model_copy(update={"last_seen": now})
        remaining = max(1, int(self.absolute_s - (now - session.created_at).total_seconds()))
        await self._redis.set(self._key(session.id), session.model_dump_json(), ex=min(self.idle_s, remaining))
        return session

    async def close(self, cookie: str | None) -> None:
        session = await self._load(cookie)
        if session is not None:
            await self._redis.delete(self._key(session.id))
            await self._redis.srem(self._user_key(session.username), session.id)

    async def close_all(self, username: str) -> None:
        """Sign ``username`` out everywhere (a password reset, a removed account)."""
        ids = [i.decode() for i in await self._redis.smembers(self._user_key(username))]
        if ids:
            await self._redis.delete(*(self._key(i) for i in ids))
        await self._redis.delete(self._user_key(username))

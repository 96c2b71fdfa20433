"""API keys for the agent API's callers (not the admin token): scoped to agents, rate-limited.

A key is ``sbk_`` + 32 random bytes, shown once and stored as its SHA-256 (a slow password hash
buys nothing for 256 random bits, and every call would pay for it). Each key has a per-minute
limit counted in Redis (fixed one-minute windows, shared by every replica).
"""

from __future__ import annotations

import hashlib
import secrets
import time

from pydantic import BaseModel, Field

from gateway.conversation.store import RedisStore
from gateway.core.errors import Forbidden, NotFound, RateLimited, Unauthorized
from gateway.core.models import new_id, utcnow

PREFIX = "sbk_"


class ApiKey(BaseModel):
    id: str
    name: str = Field(min_length=1, max_length=100)
    agents: list[str] = Field(min_length=1)
    rate_limit_per_min: int = Field(ge=1, le=100_000)
    created_at: str = Field(default_factory=lambda: utcnow().isoformat())


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


class ApiKeys:
    def __init__(self, store: RedisStore, default_rate_limit_per_min: int) -> None:
        self.store = store
        self.redis = store.redis
        self.default_rate = default_rate_limit_per_min

    async def create(self, name: str, agents: list[str], rate_limit_per_min: int | None = None) -> tuple[ApiKey, str]:
        record = ApiKey(id=new_id(), name=name, agents=agents,
                        rate_limit_per_min=rate_limit_per_min or self.default_rate)
        key = PREFIX + secrets.token_urlsafe(32)
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(self.store.key("apikeys"), record.id, record.model_dump_json())
        pipe.hset(self.store.key("apikeys", "by_digest"), _digest(key), record.id)
        await pipe.execute()
        return record, key

    async def list(self) -> list[ApiKey]:
        stored = await self.redis.hgetall(self.store.key("apikeys"))
        return [ApiKey.model_validate_json(raw) for raw in stored.values()]

    async def revoke(self, key_id: str) -> None:
        if not await self.redis.hdel(self.store.key("apikeys"), key_id):
            raise NotFound(f"no API key {key_id!r}")
        digests = await self.redis.hgetall(self.store.key("apikeys", "by_digest"))
        gone = [d for d, i in digests.items() if i.decode() == key_id]
        if gone:
            await self.redis.hdel(self.store.key("apikeys", "by_digest"), *gone)

    async def identify(self, key: str | None) -> ApiKey:
        """The key's record; 401 for a missing, unknown or revoked key."""
        if not key or not key.startswith(PREFIX):
            raise Unauthorized("an API key is required: Authorization: Bearer sbk_...")
        key_id = await self.redis.hget(self.store.key("apikeys", "by_digest"), _digest(key))
        raw = await self.redis.hget(self.store.key("apikeys"), key_id.decode()) if key_id else None
        if raw is None:
            raise Unauthorized("unknown or revoked API key")
        return ApiKey.model_validate_json(raw)

    async def authorize(self, key: str | None, agent_id: str) -> ApiKey:
        """The key's record if it may call ``agent_id`` now: 401 unknown or revoked, 403 another agent's,
        429 (with the seconds to wait) past its per-minute limit."""
        record = await self.identify(key)
        if agent_id not in record.agents:
            raise Forbidden(f"this API key may not call agent {agent_id!r}")
        window = int(time.time() // 60)
        counter = self.store.key("apikeys", "rate", record.id, str(window))
        pipe = self.redis.pipeline(transaction=False)
        pipe.incr(counter)
        pipe.expire(counter, 120)
        used, _ = await pipe.execute()
        if used > record.rate_limit_per_min:
            raise RateLimited(f"this API key allows {record.rate_limit_per_min} calls a minute",
                              retry_after_s=max(1, 60 - int(time.time() % 60)))
        return record

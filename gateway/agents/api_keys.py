"""API keys for the agent API's callers (not the admin token): scoped to agents, rate-limited.

A key is ``sbk_`` + 32 random bytes, shown once and stored only as its SHA-256. A slow password
hash (argon2, as operators' passwords use) protects guessable secrets; 256 random bits cannot be
guessed from their digest, and every call would pay argon2's cost. The digest is also the lookup
key, so the time an answer takes depends on a hash of the guess, never on how much of a real key it
matches: there is no secret comparison left to make constant-time.

Each key has a per-minute limit counted in Redis and shared by every replica (``RateLimit``): the
window starts at the key's first call and lasts 60 s; past the limit a call is refused until the window ends.
"""

from __future__ import annotations

import hashlib
import secrets

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.conversation.rate_limit import RateLimit
from gateway.conversation.store import RedisStore
from gateway.core.errors import Forbidden, InvalidInput, NotFound, Unauthorized
from gateway.core.models import new_id, utcnow

__all__ = ["PREFIX", "ApiKey", "ApiKeyCreate", "ApiKeys", "refusal"]

PREFIX = "sbk_"


class ApiKeyCreate(BaseModel):
    """``POST /api/keys``; snake_case as the issue names the fields."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=100)
    agents: list[str] = Field(min_length=1, max_length=100)
    rate_limit_per_min: int | None = Field(default=None, ge=1, le=100_000)


class ApiKey(BaseModel):
    """What is kept of a key (never the key itself)."""

    id: str
    name: str
    agents: list[str]
    rate_limit_per_min: int
    created_at: str = Field(default_factory=lambda: utcnow().isoformat())


# A key's record by its digest, in one round trip. KEYS: by_digest, records. ARGV: digest.
_BY_DIGEST = """
local id = redis.call('HGET', KEYS[1], ARGV[1])
if not id then return false end
return redis.call('HGET', KEYS[2], id)
"""


def refusal(agent: str) -> str:
    return f"this API key may not call agent {agent!r}"


def digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _invalid(exc: ValidationError) -> InvalidInput:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    return InvalidInput(f"{where}: {first['msg']}")


class ApiKeys:
    """``apikeys`` (id → record), ``apikeys:by_digest`` (digest → id), ``apikeys:digest_of`` (id →
    digest, so a revoke needs no scan); calls in the current window are the ``api-key`` rate limit's."""

    def __init__(self, store: RedisStore, default_rate_limit_per_min: int, rate: RateLimit) -> None:
        self.store = store
        self.redis = store.redis
        self.default_rate = default_rate_limit_per_min
        self.rate = rate
        self._by_digest = self.redis.register_script(_BY_DIGEST)

    @property
    def by_digest_key(self) -> str:
        """The hash from a key's digest to its id."""
        return self._key("by_digest")

    def _key(self, *parts: str) -> str:
        return self.store.key("apikeys", *parts)

    async def create(self, name: str, agents: list[str], rate_limit_per_min: int | None = None) -> tuple[ApiKey, str]:
        """The record and the plaintext key, which is not kept and cannot be shown again."""
        try:
            spec = ApiKeyCreate(name=name, agents=agents, rate_limit_per_min=rate_limit_per_min)
        except ValidationError as exc:
            raise _invalid(exc) from exc
        record = ApiKey(id=new_id(), name=spec.name, agents=list(dict.fromkeys(spec.agents)),
                        rate_limit_per_min=spec.rate_limit_per_min or self.default_rate)
        key = PREFIX + secrets.token_urlsafe(32)
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(self.store.key("apikeys"), record.id, record.model_dump_json())
        pipe.hset(self._key("by_digest"), digest(key), record.id)
        pipe.hset(self._key("digest_of"), record.id, digest(key))
        await pipe.execute()
        return record, key

    async def list(self) -> list[ApiKey]:
        stored = await self.redis.hgetall(self.store.key("apikeys"))
        return sorted((ApiKey.model_validate_json(raw) for raw in stored.values()), key=lambda k: k.created_at)

    async def revoke(self, key_id: str) -> None:
        known = await self.redis.hget(self._key("digest_of"), key_id)
        if known is None:
            raise NotFound(f"no API key {key_id!r}")
        pipe = self.redis.pipeline(transaction=True)
        pipe.hdel(self.store.key("apikeys"), key_id)
        pipe.hdel(self._key("by_digest"), known.decode())
        pipe.hdel(self._key("digest_of"), key_id)
        await pipe.execute()
        await self.rate.clear(key_id)

    async def authenticate(self, key: str | None) -> ApiKey | None:
        """The key's record, or None for a missing, unknown or revoked key."""
        if not key or not key.startswith(PREFIX):
            return None
        raw = await self._by_digest(keys=[self._key("by_digest"), self.store.key("apikeys")], args=[digest(key)])
        return ApiKey.model_validate_json(raw) if raw else None

    async def identify(self, key: str | None) -> ApiKey:
        """The key's record; 401 for a missing, unknown or revoked key."""
        if not key:
            raise Unauthorized("an API key is required: Authorization: Bearer sbk_...")
        record = await self.authenticate(key)
        if record is None:
            raise Unauthorized("unknown or revoked API key")
        return record

    async def authorize(self, key: str | None, agent_id: str) -> ApiKey:
        """``identify`` then ``admit``: 401, 403 or 429, else the key's record."""
        return await self.admit(await self.identify(key), agent_id)

    async def admit(self, record: ApiKey, agent_id: str, *, shown_as: str | None = None) -> ApiKey:
        """``record`` (from ``identify``) if its key may call ``agent_id`` now: 403 naming ``shown_as`` (the
        name the caller used) for another agent's key, 429 (with the seconds to wait) past its per-minute
        limit. Takes one call of the limit; refused calls use none."""
        if agent_id not in record.agents:
            raise Forbidden(refusal(shown_as or agent_id))
        await self.rate.take(record.id, record.rate_limit_per_min)
        return record

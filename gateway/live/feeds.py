"""Inbound data feeds: signed pushes that become named prompt sections, project-wide or per persona.

Signature: ``X-Switchboard-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + raw body)>``
with ``X-Switchboard-Timestamp`` (unix seconds) inside the replay window; a signature is accepted
once. The secret is the feed's own (``SWITCHBOARD_FEED_SECRETS``) or ``SWITCHBOARD_FEEDS_SECRET``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gateway.conversation.store import RedisStore
from gateway.core.clock import Clock
from gateway.core.errors import Forbidden, Unauthorized
from gateway.core.settings import Settings
from gateway.live.sections import validate_section_name

MAX_EXPIRES_IN_S = 90 * 24 * 3600


class FeedPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    data: Any = None
    persona_id: str | None = Field(default=None, min_length=1, max_length=64)
    expires_in: int | None = Field(default=None, gt=0, le=MAX_EXPIRES_IN_S)

    @model_validator(mode="after")
    def _one_body(self) -> FeedPayload:
        if (self.text is None) == (self.data is None):
            raise ValueError('give exactly one of "text" or "data"')
        return self

    def as_text(self) -> str:
        if self.text is not None:
            return self.text.strip()
        return json.dumps(self.data, ensure_ascii=False, indent=2)


class FeedEntry(BaseModel):
    feed: str
    text: str
    received_at: datetime
    expires_at: datetime | None = None
    persona_id: str | None = None


def sign(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


class Feeds:
    def __init__(self, store: RedisStore, settings: Settings, clock: Clock) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock

    def secret_for(self, feed: str) -> str:
        own = self.settings.feed_secrets.get(feed)
        secret = own or self.settings.feeds_secret
        if secret is None:
            raise Forbidden(f"feed {feed!r} has no secret: set SWITCHBOARD_FEEDS_SECRET or SWITCHBOARD_FEED_SECRETS")
        return secret.get_secret_value()

    async def verify(self, feed: str, timestamp: str | None, signature: str | None, body: bytes) -> None:
        """``Unauthorized`` unless signed with the feed's secret, fresh, and not seen before."""
        secret = self.secret_for(feed)
        if not timestamp or not signature:
            raise Unauthorized("missing X-Switchboard-Timestamp or X-Switchboard-Signature")
        try:
            sent = int(timestamp)
        except ValueError:
            raise Unauthorized("X-Switchboard-Timestamp must be unix seconds") from None
        window = self.settings.feeds_replay_window_s
        if abs(self.clock.now().timestamp() - sent) > window:
            raise Unauthorized(f"stale timestamp: more than {window} seconds from the gateway's clock")
        if not hmac.compare_digest(sign(secret, timestamp, body), signature.strip()):
            raise Unauthorized("bad signature")
        fresh = await self.store.redis.set(
            self.store.key("feeds", "seen", hashlib.sha256(signature.encode()).hexdigest()),
            "1", nx=True, ex=2 * window,
        )
        if not fresh:
            raise Unauthorized("replayed signature")

    def _key(self, persona_id: str | None) -> str:
        return self.store.key("persona", persona_id, "feeds") if persona_id else self.store.key("feeds", "project")

    async def put(self, feed: str, payload: FeedPayload) -> FeedEntry:
        validate_section_name(feed)
        now = self.clock.now()
        entry = FeedEntry(
            feed=feed,
            text=payload.as_text(),
            received_at=now,
            expires_at=now + timedelta(seconds=payload.expires_in) if payload.expires_in else None,
            persona_id=payload.persona_id,
        )
        await self.store.redis.hset(self._key(payload.persona_id), feed, entry.model_dump_json())
        return entry

    async def remove(self, feed: str, persona_id: str | None = None) -> bool:
        return bool(await self.store.redis.hdel(self._key(persona_id), feed))

    async def live(self, persona_id: str | None) -> list[FeedEntry]:
        """Unexpired sections, project-wide first, each scope in feed-name order; expired ones are dropped."""
        keys = self.keys(persona_id)
        pipe = self.store.redis.pipeline(transaction=False)
        for key in keys:
            pipe.hgetall(key)
        return await self.unexpired(keys, await pipe.execute())

    def keys(self, persona_id: str | None) -> list[str]:
        """The hashes ``live`` reads, project-wide first (a caller may read them in its own pipeline)."""
        return [self._key(None)] + ([self._key(persona_id)] if persona_id else [])

    async def unexpired(self, keys: Sequence[str], raws: Sequence[Mapping[bytes, bytes]]) -> list[FeedEntry]:
        """The entries of the hashes ``keys`` as read; the expired ones are dropped from Redis."""
        now = self.clock.now()
        entries: list[FeedEntry] = []
        for key, raw in zip(keys, raws, strict=True):
            expired = []
            for name, value in sorted(raw.items()):
                entry = FeedEntry.model_validate_json(value)
                if entry.expires_at is not None and entry.expires_at <= now:
                    expired.append(name)
                else:
                    entries.append(entry)
            if expired:
                await self.store.redis.hdel(key, *expired)
        return entries

"""Tool sources in Redis, read fresh by every turn: a change is seen by every replica at once.

``toolsource:<id>`` holds the record as JSON with the headers sealed (the connections' Fernet box,
``SWITCHBOARD_SECRET_KEY``), the server's tool listing and its status; ``toolsources`` is the set of
ids. The decrypted form is kept per process keyed by the stored bytes, so an unchanged record is not
decrypted again and a changed one (another replica's PATCH or refresh) is seen on the next read.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel

from gateway.conversation.store import RedisStore
from gateway.core.errors import NotFound
from gateway.core.models import utcnow
from gateway.tools.model import SourceStatus, ToolInfo, ToolSource

__all__ = ["SecretBox", "ToolSourceStore"]

_DECRYPTED_CACHE = 256


class SecretBox(Protocol):
    """Seals secrets at rest (``gateway.connections.secrets.CredentialBox``)."""

    @property
    def ready(self) -> bool: ...  # a key is set: headers can be sealed

    def seal(self, credentials: dict[str, str]) -> str: ...

    def open(self, sealed: str) -> dict[str, str]: ...

    def rotated(self, sealed: str) -> str | None: ...


class _Stored(BaseModel):
    id: str
    kind: str
    name: str
    url: str
    sealed: str = ""  # the headers, encrypted; "" for none
    operations: list[str] = []  # OpenAPI sources
    command: list[str] = []  # stdio sources
    status: SourceStatus
    tools: list[ToolInfo]
    created_at: datetime
    updated_at: datetime


class ToolSourceStore:
    def __init__(self, store: RedisStore, box: SecretBox) -> None:
        self.store = store
        self.redis = store.redis
        self.box = box
        self._opened: dict[bytes, ToolSource] = {}

    def _key(self, source_id: str) -> str:
        return self.store.key("toolsource", source_id)

    async def get(self, source_id: str) -> ToolSource:
        raw = await self.redis.get(self._key(source_id))
        if raw is None:
            raise NotFound(f"no tool source {source_id!r}; GET /api/tool-sources lists them")
        return self._open(raw)

    async def list(self) -> list[ToolSource]:
        ids = sorted(i.decode() for i in await self.redis.smembers(self.store.key("toolsources")))
        return sorted(await self.many(ids), key=lambda s: s.name)

    async def many(self, ids: Iterable[str]) -> list[ToolSource]:
        """The sources with these ids that exist (one round trip)."""
        keys = [self._key(i) for i in ids]
        raws = await self.redis.mget(keys) if keys else []
        return [self._open(raw) for raw in raws if raw is not None]

    def _open(self, raw: bytes) -> ToolSource:
        cached = self._opened.get(raw)
        if cached is not None:
            return cached
        stored = _Stored.model_validate_json(raw)
        headers = self.box.open(stored.sealed) if stored.sealed else {}
        source = ToolSource(id=stored.id, kind=stored.kind, name=stored.name, url=stored.url, headers=headers,
                            operations=stored.operations, command=stored.command, status=stored.status,
                            tools=stored.tools,
                            created_at=stored.created_at, updated_at=stored.updated_at)
        if len(self._opened) >= _DECRYPTED_CACHE:
            self._opened.clear()
        self._opened[raw] = source
        return source

    async def save(self, source: ToolSource) -> ToolSource:
        source = source.model_copy(update={"updated_at": utcnow()})
        stored = _Stored(id=source.id, kind=source.kind, name=source.name, url=source.url,
                         sealed=self.box.seal(source.headers) if source.headers else "",
                         operations=source.operations, command=source.command, status=source.status,
                         tools=source.tools, created_at=source.created_at, updated_at=source.updated_at)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self._key(source.id), stored.model_dump_json())
            pipe.sadd(self.store.key("toolsources"), source.id)
            await pipe.execute()
        return source

    async def delete(self, source_id: str) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(self._key(source_id))
            pipe.srem(self.store.key("toolsources"), source_id)
            await pipe.execute()

    async def rotate_keys(self) -> int:
        """Re-seal every source's headers under the newest key; how many changed."""
        changed = 0
        for raw_id in await self.redis.smembers(self.store.key("toolsources")):
            key = self._key(raw_id.decode())
            raw = await self.redis.get(key)
            if raw is None:
                continue
            stored = _Stored.model_validate_json(raw)
            resealed = self.box.rotated(stored.sealed) if stored.sealed else None
            if resealed is not None:
                await self.redis.set(key, stored.model_copy(update={"sealed": resealed}).model_dump_json())
                changed += 1
        return changed

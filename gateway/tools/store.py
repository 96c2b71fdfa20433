"""Tool sources in Redis, read fresh by every turn: a change is seen by every replica at once.

``toolsourcerecords`` is a hash of every source, id → the record as JSON with the headers sealed (the
connections' Fernet box, ``SWITCHBOARD_SECRET_KEY``), the server's tool listing and its status: listing
them is one command (a turn lists them at most once a second per process). The first layout (a
``toolsource:<id>`` key per record and the ``toolsources`` set of ids) is moved into the hash by the
first listing that finds it (checked in the listing's round trip). The decrypted form is kept per
process keyed by the stored bytes, so an unchanged record is not decrypted again and a changed one
(another replica's PATCH or refresh) is seen on the next read.
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

    @property
    def _records(self) -> str:
        return self.store.key("toolsourcerecords")

    async def get(self, source_id: str) -> ToolSource:
        raw = await self.redis.hget(self._records, source_id)
        if raw is None:
            raise NotFound(f"no tool source {source_id!r}; GET /api/tool-sources lists them")
        return self._open(raw)

    async def list(self) -> list[ToolSource]:
        """Every source, by name (one round trip)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self._records)
            pipe.exists(self.store.key("toolsources"))
            records, legacy = await pipe.execute()
        if legacy:
            records = await self._move_legacy()
        return sorted((self._open(raw) for raw in records.values()), key=lambda s: s.name)

    async def many(self, ids: Iterable[str]) -> list[ToolSource]:
        """The sources with these ids that exist (one round trip)."""
        ids = list(ids)
        raws = await self.redis.hmget(self._records, ids) if ids else []
        return [self._open(raw) for raw in raws if raw is not None]

    async def _move_legacy(self) -> dict:
        """The first layout's records moved into the hash (once); the hash's records after."""
        legacy = self.store.key("toolsources")
        ids = [i.decode() for i in await self.redis.smembers(legacy)]
        keys = [self.store.key("toolsource", i) for i in ids]
        raws = await self.redis.mget(keys) if keys else []
        async with self.redis.pipeline(transaction=True) as pipe:
            for source_id, raw in zip(ids, raws, strict=True):
                if raw is not None:
                    pipe.hsetnx(self._records, source_id, raw)  # a record saved in the new layout wins
            pipe.delete(legacy, *keys)
            pipe.hgetall(self._records)
            return (await pipe.execute())[-1]

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
        await self.redis.hset(self._records, source.id, stored.model_dump_json())
        return source

    async def delete(self, source_id: str) -> None:
        await self.redis.hdel(self._records, source_id)

    async def rotate_keys(self) -> int:
        """Re-seal every source's headers under the newest key; how many changed."""
        await self.list()  # the first layout moved, if it is there
        changed = {}
        for source_id, raw in (await self.redis.hgetall(self._records)).items():
            stored = _Stored.model_validate_json(raw)
            resealed = self.box.rotated(stored.sealed) if stored.sealed else None
            if resealed is not None:
                changed[source_id] = stored.model_copy(update={"sealed": resealed}).model_dump_json()
        if changed:
            await self.redis.hset(self._records, mapping=changed)
        return len(changed)

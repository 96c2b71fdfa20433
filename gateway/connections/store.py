"""Connections in Redis, read fresh on every webhook: a change is seen by every replica at once.

``connection:<id>`` holds the record as JSON with the credentials sealed (``CredentialBox``);
``connections`` is the set of ids; ``connection:<id>:status`` a hash of the status fields that
traffic updates (written without touching the record). A webhook reads its connection with one
``GET``; the decrypted form is kept per process keyed by the stored bytes, so an unchanged record
is not decrypted again and a changed one (another replica's PATCH or DELETE) is seen at once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

from pydantic import BaseModel

from gateway.connections.model import DEFAULT_ID, Connection, ConnectionStatus
from gateway.connections.secrets import CredentialBox, UnreadableCredentials
from gateway.conversation.store import RedisStore
from gateway.core.errors import NotFound
from gateway.core.models import utcnow

__all__ = ["ConnectionStore"]

log = logging.getLogger(__name__)
_DECRYPTED_CACHE = 256


class _Stored(BaseModel):
    """The record as Redis holds it: everything but the plain credentials and the live status."""

    id: str
    kind: str
    name: str
    agent: str | None = None
    enabled: bool = True
    sealed: str = ""  # the credentials, encrypted; "" for none
    verified_at: datetime | None = None
    account: str | None = None
    created_at: datetime
    updated_at: datetime


class ConnectionStore:
    def __init__(self, store: RedisStore, box: CredentialBox) -> None:
        self.store = store
        self.redis = store.redis
        self.box = box
        self._opened: dict[bytes, Connection] = {}

    def _key(self, *parts: str) -> str:
        return self.store.key("connection", *parts)

    # -- reading -------------------------------------------------------------------------------
    async def get(self, connection_id: str, *, with_status: bool = True) -> Connection:
        raw = await self.redis.get(self._key(connection_id))
        if raw is None:
            raise NotFound(f"no connection {connection_id!r}; GET /api/connections lists them")
        connection = self._open(raw)
        if with_status:
            connection = connection.model_copy(update={"status": await self._status(connection_id, raw)})
        return connection

    async def find(self, connection_id: str) -> Connection | None:
        """The connection a webhook names, for routing (one round trip); None when there is none."""
        raw = await self.redis.get(self._key(connection_id))
        if raw is None:
            return None
        try:
            return self._open(raw)
        except UnreadableCredentials as exc:
            log.error("connection %s cannot be used: %s", connection_id, exc.message)
            return None

    async def list(self) -> list[Connection]:
        ids = sorted(i.decode() for i in await self.redis.smembers(self.store.key("connections")))
        found = []
        for connection_id in ids:
            try:
                found.append(await self.get(connection_id))
            except NotFound:
                continue
            except UnreadableCredentials as exc:
                log.error("connection %s: %s", connection_id, exc.message)
        return sorted(found, key=lambda c: (c.kind, c.name))

    def _open(self, raw: bytes) -> Connection:
        cached = self._opened.get(raw)
        if cached is not None:
            return cached
        stored = _Stored.model_validate_json(raw)
        credentials = self.box.open(stored.sealed) if stored.sealed else {}
        connection = Connection(
            id=stored.id, kind=stored.kind, name=stored.name, agent=stored.agent, enabled=stored.enabled,
            credentials=credentials, created_at=stored.created_at, updated_at=stored.updated_at,
            status=ConnectionStatus(verified_at=stored.verified_at, account=stored.account),
        )
        if len(self._opened) >= _DECRYPTED_CACHE:
            self._opened.clear()
        self._opened[raw] = connection
        return connection

    async def _status(self, connection_id: str, raw: bytes) -> ConnectionStatus:
        stored = _Stored.model_validate_json(raw)
        raw_status = await self.redis.hgetall(self._key(connection_id, "status"))
        fields = {k.decode(): v.decode() for k, v in raw_status.items()}
        return ConnectionStatus.model_validate({"verified_at": stored.verified_at, "account": stored.account, **fields})

    # -- writing -------------------------------------------------------------------------------
    async def save(self, connection: Connection) -> Connection:
        """Create or replace the record (credentials sealed); the status hash is kept."""
        connection = connection.model_copy(update={"updated_at": utcnow()})
        stored = _Stored(
            id=connection.id, kind=connection.kind, name=connection.name, agent=connection.agent,
            enabled=connection.enabled, sealed=self.box.seal(connection.credentials) if connection.credentials else "",
            verified_at=connection.status.verified_at, account=connection.status.account,
            created_at=connection.created_at, updated_at=connection.updated_at,
        )
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self._key(connection.id), stored.model_dump_json())
            pipe.sadd(self.store.key("connections"), connection.id)
            await pipe.execute()
        return connection

    async def delete(self, connection_id: str) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(self._key(connection_id), self._key(connection_id, "status"))
            pipe.srem(self.store.key("connections"), connection_id)
            await pipe.execute()

    async def note(self, connection_id: str, **fields: object) -> None:
        """Update status fields (``last_inbound_at=…``, ``last_error=…``) without touching the record."""
        values: Mapping[str, str] = {k: v.isoformat() if isinstance(v, datetime) else str(v)
                                     for k, v in fields.items() if v is not None}
        cleared = [k for k, v in fields.items() if v is None]
        async with self.redis.pipeline(transaction=False) as pipe:
            if values:
                pipe.hset(self._key(connection_id, "status"), mapping=dict(values))
            if cleared:
                pipe.hdel(self._key(connection_id, "status"), *cleared)
            await pipe.execute()

    async def note_error(self, connection_id: str, error: str) -> None:
        await self.note(connection_id, last_error=error[:500], last_error_at=utcnow())

    async def note_environment(self, kind: str, **fields: object) -> None:
        """Status fields of the environment-configured channel of ``kind`` (part of ``default``)."""
        await self.note(f"{DEFAULT_ID}:{kind}", **fields)

    async def environment_status(self, kind: str) -> ConnectionStatus:
        raw = await self.redis.hgetall(self._key(DEFAULT_ID, kind, "status"))
        return ConnectionStatus.model_validate({k.decode(): v.decode() for k, v in raw.items()})

    async def count_refusal(self, connection_id: str) -> None:
        await self.redis.hincrby(self._key(connection_id, "status"), "waiting_for_template", 1)

    async def rotate_keys(self) -> int:
        """Re-seal every connection's credentials under the newest key; how many changed."""
        changed = 0
        for raw_id in await self.redis.smembers(self.store.key("connections")):
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

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

from pydantic import BaseModel, ValidationError

from gateway.connections.key_report import KeyReport, RecordKey
from gateway.connections.model import DEFAULT_ID, Connection, ConnectionStatus, is_connection_id
from gateway.connections.phone_lines import line_digest
from gateway.connections.secrets import UNOPENED, CredentialBox, UnreadableCredentials
from gateway.conversation.store import RedisStore
from gateway.core.errors import NotFound
from gateway.core.models import utcnow

__all__ = ["ConnectionStore"]

log = logging.getLogger(__name__)
_DECRYPTED_CACHE = 256
# Replace a record only if it is still the one that was read: a save by another replica in between wins.
_SWAP = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end
return 0
"""


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
        self._lines: dict[str, str] = {}  # a number's line -> the connection id it scopes by (never changes)

    def _key(self, *parts: str) -> str:
        return self.store.key("connection", *parts)

    # -- reading -------------------------------------------------------------------------------
    async def get(self, connection_id: str, *, with_status: bool = True) -> Connection:
        raw = await self.redis.get(self._key(connection_id)) if is_connection_id(connection_id) else None
        if raw is None:
            raise NotFound(f"no connection {connection_id!r}; GET /api/connections lists them")
        connection = self._open(raw)
        if with_status:
            connection = connection.model_copy(update={"status": await self._status(connection_id, raw)})
        return connection

    async def find(self, connection_id: str) -> Connection | None:
        """The connection a webhook names, for routing (one round trip); None when there is none."""
        if not is_connection_id(connection_id):
            return None
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
            except ValidationError:  # one damaged record must not hide the others
                log.error("connection %s: the stored record is damaged; `switchboard connections check-keys` "
                          "names it", connection_id)
        return sorted(found, key=lambda c: (c.kind, c.name))

    async def persona_scope(self, connection: Connection) -> str:
        """What ``connection``'s customers are scoped by: its id, or for a phone number's connection its
        number's line, shared by the number's SMS and voice connections (``gateway.connections.phone_lines``)."""
        digest = line_digest(connection)
        if digest is None:
            return connection.id
        known = self._lines.get(digest)
        if known is not None:
            return known
        key = self.store.key("phone_line", digest)
        raw = await self.redis.get(key)
        if raw is None:  # the line's first use: its oldest connection, which may have customers already
            siblings = [c for c in await self.list() if line_digest(c) == digest] or [connection]
            oldest = min(siblings, key=lambda c: (c.created_at, c.id))
            async with self.redis.pipeline(transaction=True) as pipe:
                _, raw = await pipe.set(key, oldest.id, nx=True).get(key).execute()
        if len(self._lines) >= _DECRYPTED_CACHE:
            self._lines.clear()
        self._lines[digest] = raw.decode()
        return self._lines[digest]

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

    async def note_error(self, connection: Connection, error: str) -> None:
        """The connection's ``last_error``, its credentials masked (a vendor's error may echo one)."""
        await self.note(connection.id, last_error=connection.redact(error)[:500], last_error_at=utcnow())

    async def note_environment(self, kind: str, **fields: object) -> None:
        """Status fields of the environment-configured channel of ``kind`` (part of ``default``)."""
        await self.note(f"{DEFAULT_ID}:{kind}", **fields)

    async def environment_status(self, kind: str) -> ConnectionStatus:
        raw = await self.redis.hgetall(self._key(DEFAULT_ID, kind, "status"))
        return ConnectionStatus.model_validate({k.decode(): v.decode() for k, v in raw.items()})

    async def count_refusal(self, connection_id: str) -> None:
        await self.redis.hincrby(self._key(connection_id, "status"), "waiting_for_template", 1)

    async def _records(self) -> list[tuple[str, bytes]]:
        ids = sorted(i.decode() for i in await self.redis.smembers(self.store.key("connections")))
        raws = await self.redis.mget([self._key(i) for i in ids]) if ids else []
        return [(i, raw) for i, raw in zip(ids, raws, strict=True) if raw is not None]

    def _where(self, connection_id: str, raw: bytes) -> tuple[RecordKey, _Stored | None]:
        try:
            stored = _Stored.model_validate_json(raw)
        except ValidationError as exc:
            reason = f"the stored record is damaged ({exc.error_count()} error(s): {exc.errors()[0]['msg']})"
            return RecordKey(connection_id, "", None, reason=reason), None
        if not stored.sealed:
            return RecordKey(connection_id, stored.kind, None, sealed=False), stored
        position = self.box.key_of(stored.sealed)
        reason = "" if position is not None else UNOPENED
        return RecordKey(connection_id, stored.kind, position, reason=reason), stored

    async def check_keys(self) -> KeyReport:
        """Which configured key opens each connection's credentials; changes nothing."""
        return KeyReport(tuple(self._where(i, raw)[0] for i, raw in await self._records()))

    async def rotate_keys(self) -> KeyReport:
        """Re-seal every connection's credentials that an older key opens under the newest key. A record no
        key opens is reported (by id, with the reason) and the others are re-sealed all the same."""
        swap = self.redis.register_script(_SWAP)
        records, resealed = [], []
        for connection_id, raw in await self._records():
            where, stored = self._where(connection_id, raw)
            if stored is not None and where.needs_older_key:
                try:
                    sealed = self.box.rotated(stored.sealed)
                except UnreadableCredentials as exc:  # opened a moment ago: only a damaged token gets here
                    where = RecordKey(connection_id, stored.kind, None, reason=exc.message)
                else:
                    new = stored.model_copy(update={"sealed": sealed}).model_dump_json()
                    if await swap(keys=[self._key(connection_id)], args=[raw, new]):
                        where = RecordKey(connection_id, stored.kind, 0)
                        resealed.append(connection_id)
                    else:  # saved meanwhile (under the newest key, as every save is): report what is there now
                        now = await self.redis.get(self._key(connection_id))
                        if now is None:
                            continue
                        where = self._where(connection_id, now)[0]
            records.append(where)
        return KeyReport(tuple(records), tuple(resealed))

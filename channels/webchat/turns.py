"""Web-chat turns that survive the process answering them.

The web chat answers in the HTTP response (or the socket), so its turns do not go through the
inbox. Instead each accepted turn is saved with a lease that the answering process renews while
it works. If that process dies, the lease lapses and the turn is *orphaned*: a resend of the same
``client_message_id`` runs it at once, and every gateway's sweep picks up orphans it finds, so
the reply reaches the transcript either way — without storing the user message twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from enum import StrEnum

from gateway.channel import RedisStore, Turn

__all__ = ["TurnState", "WebTurns"]

log = logging.getLogger(__name__)

SNAPSHOT_TTL_S = 24 * 3600

# KEYS: leases   ARGV: member (or "" for any), now_ms, new lease ms, count
# Takes over leases that ran out: one member, or up to ``count`` of them.
_CLAIM = """
local now = tonumber(ARGV[2])
local until_ms = now + tonumber(ARGV[3])
if ARGV[1] ~= '' then
  local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
  if score and tonumber(score) <= now then
    redis.call('ZADD', KEYS[1], until_ms, ARGV[1])
    return {ARGV[1]}
  end
  return {}
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
for _, member in ipairs(expired) do
  redis.call('ZADD', KEYS[1], until_ms, member)
end
return expired
"""


class TurnState(StrEnum):
    FINISHED = "finished"  # nothing pending: answered (or never accepted here)
    RUNNING = "running"  # a live process is answering it
    ORPHANED = "orphaned"  # accepted, unanswered, and its process is gone


class WebTurns:
    def __init__(self, store: RedisStore, lease_s: float = 10.0, max_attempts: int = 3) -> None:
        self.store = store
        self.redis = store.redis
        self.lease_ms = int(lease_s * 1000)
        self.max_attempts = max_attempts
        self.leases = store.key("webchat", "leases")
        self._claim = self.redis.register_script(_CLAIM)

    def _snapshot_key(self, message_key: str) -> str:
        return self.store.key("webchat", "turn", message_key)

    def _attempts_key(self, message_key: str) -> str:
        return self.store.key("webchat", "attempts", message_key)

    def save_into(self, pipe, message_key: str, turn: Turn) -> None:
        """Record an accepted turn, leased to this process: queued in the turn's opening round trip
        (``TurnPipeline.accept``'s ``opening``)."""
        pipe.set(self._snapshot_key(message_key), turn.snapshot(), ex=SNAPSHOT_TTL_S)
        pipe.zadd(self.leases, {message_key: _now_ms() + self.lease_ms})

    async def state(self, message_key: str) -> TurnState:
        pipe = self.redis.pipeline(transaction=False)
        pipe.exists(self._snapshot_key(message_key))
        pipe.zscore(self.leases, message_key)
        exists, lease = await pipe.execute()
        if not exists or lease is None:
            return TurnState.FINISHED
        return TurnState.RUNNING if lease > _now_ms() else TurnState.ORPHANED

    async def take_over(self, message_key: str) -> Turn | None:
        """The orphaned turn, now leased to this process; None if it is not orphaned (any more)."""
        claimed = await self._claim(keys=[self.leases], args=[message_key, _now_ms(), self.lease_ms, 1])
        return await self._load(message_key) if claimed else None

    async def take_orphans(self, count: int) -> list[tuple[str, Turn]]:
        claimed = await self._claim(keys=[self.leases], args=["", _now_ms(), self.lease_ms, count])
        found = []
        for raw in claimed:
            key = raw.decode() if isinstance(raw, bytes) else raw
            turn = await self._load(key)
            if turn is not None:
                found.append((key, turn))
        return found

    async def _load(self, message_key: str) -> Turn | None:
        raw = await self.redis.get(self._snapshot_key(message_key))
        if raw is None:  # finished meanwhile (or expired): nothing to resume
            await self.redis.zrem(self.leases, message_key)
            return None
        attempts = await self.redis.incr(self._attempts_key(message_key))
        await self.redis.expire(self._attempts_key(message_key), SNAPSHOT_TTL_S)
        if attempts > self.max_attempts:
            log.error("web-chat turn %s failed %d times; giving up on it", message_key, attempts - 1)
            await self.finish(message_key)
            return None
        return Turn.restore(raw)

    def finish_into(self, pipe, message_key: str) -> None:
        """The turn is done: its record goes, in the turn's closing round trip (see ``leased``)."""
        pipe.delete(self._snapshot_key(message_key), self._attempts_key(message_key))
        pipe.zrem(self.leases, message_key)

    async def release(self, message_key: str) -> None:
        """This process cannot finish the turn now (it failed): the sweep may try it again."""
        await self.redis.zadd(self.leases, {message_key: 0})

    @asynccontextmanager
    async def leased(self, message_key: str, turn: Turn) -> AsyncIterator[None]:
        """Keep the turn's lease while the block runs the turn; released if it fails. Finished in the
        turn's own closing round trip (a turn that ran to the end, answered or held, has run it)."""
        turn.closing.append(lambda pipe: self.finish_into(pipe, message_key))
        keeper = asyncio.create_task(self._renew(message_key), name=f"web turn lease {message_key}")
        try:
            yield
        except BaseException:
            keeper.cancel()
            with suppress(Exception):
                await self.release(message_key)
            raise
        else:
            keeper.cancel()

    async def _renew(self, message_key: str) -> None:
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            try:
                await self.redis.zadd(self.leases, {message_key: _now_ms() + self.lease_ms}, xx=True)
            except Exception as exc:  # Redis away: the next renewal tries again
                log.warning("could not renew a web-chat turn lease: %s", exc)


def _now_ms() -> int:
    return int(time.time() * 1000)

"""One turn at a time per conversation, in arrival order, across every gateway process.

A ticket lock on Redis: each arrival takes the next ticket (INCR); the turn runs when the
"now serving" counter reaches it. The holder keeps a lease; if a holder dies (lease expired) or a
ticket is never claimed (its process died before running), waiters advance the counter after a
grace period so one crash can never wedge a conversation.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis.asyncio import Redis

from gateway.errors import TurnLockTimeout

# KEYS: serving, lease, stall   ARGV: ticket, now_ms, lease_ms, grace_ms
_ACQUIRE = """
local serving = tonumber(redis.call('GET', KEYS[1]) or '0')
local ticket = tonumber(ARGV[1])
if ticket <= serving then
  return -1
end
if ticket == serving + 1 then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
  redis.call('DEL', KEYS[3])
  return 1
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('DEL', KEYS[3])
  return 0
end
local stall = redis.call('GET', KEYS[3])
if not stall then
  redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[4] * 4)
elseif tonumber(ARGV[2]) - tonumber(stall) > tonumber(ARGV[4]) then
  redis.call('INCR', KEYS[1])
  redis.call('DEL', KEYS[3])
end
return 0
"""

# KEYS: serving, lease   ARGV: ticket
_RELEASE = """
if tonumber(redis.call('GET', KEYS[1]) or '0') + 1 == tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
end
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
end
return 1
"""


class TurnLock:
    def __init__(
        self, redis: Redis, prefix: str, lease_s: float = 120.0, grace_s: float = 10.0
    ) -> None:
        self.redis = redis
        self.prefix = prefix
        self.lease_ms = int(lease_s * 1000)
        self.grace_ms = int(grace_s * 1000)
        self._acquire = redis.register_script(_ACQUIRE)
        self._release = redis.register_script(_RELEASE)

    def _keys(self, conversation_id: str) -> tuple[str, str, str, str]:
        base = f"{self.prefix}turnlock:{conversation_id}:"
        return base + "ticket", base + "serving", base + "lease", base + "stall"

    def ticket_key(self, conversation_id: str) -> str:
        return self._keys(conversation_id)[0]

    async def take_ticket(self, conversation_id: str) -> int:
        return int(await self.redis.incr(self.ticket_key(conversation_id)))

    async def pass_ticket(self, conversation_id: str, ticket: int) -> None:
        """Give up a ticket without running (its work was dropped): the next one need not wait for it."""
        _, serving, lease, _ = self._keys(conversation_id)
        await self._release(keys=[serving, lease], args=[ticket])

    @asynccontextmanager
    async def hold(self, conversation_id: str, ticket: int, wait_s: float) -> AsyncIterator[None]:
        _, serving, lease, stall = self._keys(conversation_id)
        deadline = time.monotonic() + wait_s
        delay = 0.002
        while True:
            now_ms = int(time.time() * 1000)
            got = await self._acquire(
                keys=[serving, lease, stall], args=[ticket, now_ms, self.lease_ms, self.grace_ms]
            )
            if got == 1:
                break
            if got == -1:  # skipped as stalled while we were away; run rather than drop the turn
                break
            if time.monotonic() > deadline:
                raise TurnLockTimeout("another turn of this conversation is still running")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
        try:
            yield
        finally:
            await self._release(keys=[serving, lease], args=[ticket])

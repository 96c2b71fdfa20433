"""One turn at a time per conversation, in arrival order, across every gateway process.

A ticket lock on Redis: each arrival takes the next ticket (INCR); the turn runs when the
"now serving" counter reaches it. The holder keeps a short lease that it renews while the turn
runs, so a holder that dies holds the conversation for one lease at most: a waiter that finds
the lease gone while the ticket it belonged to is still being served moves the counter on at
once. A ticket that is never claimed (its process died between taking it and running) is moved
past after a grace period; a ticket given up on purpose (``pass_ticket``) is skipped at once,
whenever the counter reaches it. A holder that lost its lease (fenced: a waiter took over)
releases nothing of the new holder's.

A chat's order keys (its ticket counter and "now serving") expire together once the chat is idle:
when a release leaves every ticket taken served, both get ``idle_ttl_s``; taking a ticket makes
them persistent again in the same script. So they never expire while a delivery of the chat is
waiting or running, and a chat that starts over after expiry starts both counters from zero.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from gateway.core.awaits import awaiting
from gateway.core.errors import TurnLockTimeout

log = logging.getLogger(__name__)

# Moves "serving" past tickets that were given up (KEYS[skipped]); shared by every script below.
_SKIP_PASSED = """
local function skip_passed(serving_key, skipped_key, serving)
  while redis.call('HDEL', skipped_key, tostring(serving + 1)) == 1 do
    serving = serving + 1
    redis.call('SET', serving_key, serving)
  end
  return serving
end
"""

# KEYS: serving, lease, stall, skipped, held   ARGV: ticket, now_ms, lease_ms, grace_ms
_ACQUIRE = _SKIP_PASSED + """
local serving = skip_passed(KEYS[1], KEYS[4], tonumber(redis.call('GET', KEYS[1]) or '0'))
local ticket = tonumber(ARGV[1])
if ticket <= serving then
  return -1
end
if ticket == serving + 1 then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
  redis.call('SET', KEYS[5], ARGV[1], 'PX', ARGV[3] * 100)
  redis.call('DEL', KEYS[3])
  return 1
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('DEL', KEYS[3])
  return 0
end
if tonumber(redis.call('GET', KEYS[5]) or '0') == serving + 1 then
  -- the ticket being served was held and its lease ran out: its holder is gone
  redis.call('SET', KEYS[1], serving + 1)
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

# Once every ticket taken has been served the chat is idle: its counters expire together.
_EXPIRE_IDLE = """
local function expire_if_idle(ticket_key, serving_key, idle_ttl_ms)
  local taken = tonumber(redis.call('GET', ticket_key) or '0')
  if tonumber(redis.call('GET', serving_key) or '0') >= taken then
    redis.call('PEXPIRE', ticket_key, idle_ttl_ms)
    redis.call('PEXPIRE', serving_key, idle_ttl_ms)
  end
end
"""

# KEYS: ticket, serving   (the chat has work again: its counters must outlive it)
TAKE_TICKET = """
local ticket = redis.call('INCR', KEYS[1])
redis.call('PERSIST', KEYS[1])
redis.call('PERSIST', KEYS[2])
return ticket
"""

# KEYS: serving, lease, skipped, ticket   ARGV: ticket, skipped ttl s, idle ttl ms
_RELEASE = _SKIP_PASSED + _EXPIRE_IDLE + """
local serving = tonumber(redis.call('GET', KEYS[1]) or '0')
local ticket = tonumber(ARGV[1])
if serving + 1 == ticket then
  redis.call('SET', KEYS[1], ticket)
  skip_passed(KEYS[1], KEYS[3], ticket)
elseif ticket > serving + 1 then
  -- given up before its turn came: skipped when the counter gets there
  redis.call('HSET', KEYS[3], ARGV[1], '1')
  redis.call('EXPIRE', KEYS[3], ARGV[2])
end
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
end
expire_if_idle(KEYS[4], KEYS[1], ARGV[3])
return 1
"""

# KEYS: lease, held   ARGV: ticket, lease_ms
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2] * 100)
  return 1
end
return 0
"""

SKIPPED_TTL_S = 24 * 3600
KEEPER_STOP_S = 2.0  # how long stopping a lease keeper may take before it is logged and left behind
IDLE_TTL_S = 24 * 3600


@dataclass
class HeldTurn:
    """A conversation's turn lock while held: its lease is renewed until ``stop_keeping``; a turn that
    releases it in its own closing round trip (``TurnLock.release_into``) sets ``released``."""

    conversation_id: str
    ticket: int
    reads: list = field(default_factory=list)  # the answers to ``hold``'s ``reads``, in order
    releasing: bool = False  # its release is queued in a pipeline: the lease is no longer renewed
    released: bool = False
    keeper: asyncio.Task | None = None
    stopping: bool = False  # the keeper ends at its next wake-up even if its cancellation was lost

    async def stop_keeping(self) -> None:
        """Stop renewing the lease. Bounded: a keeper that has not ended ``KEEPER_STOP_S`` after its
        cancellation is logged with where it waits and left to end on its own, not awaited forever."""
        keeper, self.keeper = self.keeper, None
        if keeper is None:
            return
        self.stopping = True
        keeper.cancel()
        done, _ = await asyncio.wait({keeper}, timeout=KEEPER_STOP_S)
        if not done:
            log.warning("the lease keeper of conversation %s did not stop when cancelled; it waits in: %s",
                        self.conversation_id, awaiting(keeper))
        elif not keeper.cancelled():
            with suppress(Exception):
                keeper.result()


class TurnLock:
    def __init__(
        self, redis: Redis, prefix: str, lease_s: float = 10.0, grace_s: float = 10.0,
        idle_ttl_s: float = IDLE_TTL_S,
    ) -> None:
        self.redis = redis
        self.prefix = prefix
        self.lease_ms = int(lease_s * 1000)
        self.grace_ms = int(grace_s * 1000)
        self.idle_ttl_ms = max(1, int(idle_ttl_s * 1000))
        self._take = redis.register_script(TAKE_TICKET)
        self._acquire = redis.register_script(_ACQUIRE)
        self._release = redis.register_script(_RELEASE)
        self._renew = redis.register_script(_RENEW)

    def _keys(self, conversation_id: str) -> tuple[str, ...]:
        base = f"{self.prefix}turnlock:{conversation_id}:"
        return tuple(base + part for part in ("ticket", "serving", "lease", "stall", "skipped", "held"))

    def order_keys(self, conversation_id: str) -> tuple[str, str]:
        """The ticket counter and "now serving": what ``TAKE_TICKET`` needs (the inbox runs it inside its push)."""
        ticket, serving, *_ = self._keys(conversation_id)
        return ticket, serving

    async def take_ticket(self, conversation_id: str) -> int:
        return int(await self._take(keys=list(self.order_keys(conversation_id))))

    def ticket_key_parts(self) -> tuple[str, str, str]:
        """A conversation's ticket and "now serving" keys are ``prefix + id + suffix``: (prefix, ticket suffix,
        serving suffix), for a script that takes a ticket for a conversation it reads (``TAKE_TICKET``'s work)."""
        return f"{self.prefix}turnlock:", ":ticket", ":serving"

    def take_ticket_into(self, pipe: Pipeline, conversation_id: str) -> None:
        """Queue ``take_ticket`` in ``pipe`` (a turn's opening round trip); its answer is the ticket."""
        pipe.eval(TAKE_TICKET, 2, *self.order_keys(conversation_id))

    async def pass_ticket(self, conversation_id: str, ticket: int) -> None:
        """Give up a ticket without running (its work was dropped): the next one need not wait for it."""
        await self._release_ticket(conversation_id, ticket)

    async def _release_ticket(self, conversation_id: str, ticket: int) -> None:
        taken, serving, lease, _, skipped, _ = self._keys(conversation_id)
        await self._release(keys=[serving, lease, skipped, taken], args=[ticket, SKIPPED_TTL_S, self.idle_ttl_ms])

    def release_into(self, pipe, held: HeldTurn) -> None:
        """Queue the release of ``held`` in ``pipe`` (the turn's closing round trip). The caller marks it
        ``released`` once that pipeline has run; until then ``hold`` releases it itself on the way out."""
        taken, serving, lease, _, skipped, _ = self._keys(held.conversation_id)
        pipe.eval(_RELEASE, 4, serving, lease, skipped, taken, held.ticket, SKIPPED_TTL_S, self.idle_ttl_ms)
        held.releasing = True

    @asynccontextmanager
    async def hold(self, conversation_id: str, ticket: int, wait_s: float,
                   reads: Callable[[Pipeline], None] | None = None) -> AsyncIterator[HeldTurn]:
        """Wait for ``ticket``'s turn and hold the lock. ``reads`` queues reads that go in the same round
        trip as the attempt that takes the lock (so they see what the turn before left); their answers
        are ``HeldTurn.reads``."""
        _, serving, lease, stall, skipped, held_key = self._keys(conversation_id)
        deadline = time.monotonic() + wait_s
        delay = 0.002
        while True:
            now_ms = int(time.time() * 1000)
            got, values = await self._attempt(
                [serving, lease, stall, skipped, held_key], [ticket, now_ms, self.lease_ms, self.grace_ms], reads)
            if got == 1:
                break
            if got == -1:  # skipped as stalled while we were away; run rather than drop the turn
                break
            if time.monotonic() > deadline:
                raise TurnLockTimeout("another turn of this conversation is still running")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
        held = HeldTurn(conversation_id, ticket, reads=values)
        held.keeper = asyncio.create_task(self._keep(lease, held_key, ticket, held),
                                          name=f"turn lease {conversation_id}")
        try:
            yield held
        finally:
            await held.stop_keeping()
            if not held.released:
                await self._release_ticket(conversation_id, ticket)

    async def _attempt(self, keys: list[str], args: list, reads: Callable[[Pipeline], None] | None) -> tuple[int, list]:
        if reads is None:
            return int(await self._acquire(keys=keys, args=args)), []
        pipe = self.redis.pipeline(transaction=False)
        pipe.eval(_ACQUIRE, len(keys), *keys, *args)
        reads(pipe)
        got, *values = await pipe.execute()
        return int(got), values

    async def _keep(self, lease: str, held: str, ticket: int, holder: HeldTurn) -> None:
        """Renew the lease while the turn runs; a lost lease means a waiter took over (logged once)."""
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            if holder.releasing or holder.stopping:
                return
            try:
                if not await self._renew(keys=[lease, held], args=[ticket, self.lease_ms]):
                    log.warning("turn lease lost (ticket %d): a later turn may run alongside this one", ticket)
                    return
            except Exception as exc:  # Redis away: the next renewal tries again; the lease may lapse
                log.warning("could not renew a turn lease: %s", exc)

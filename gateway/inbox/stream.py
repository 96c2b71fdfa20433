"""The inbox: vendor deliveries acknowledged at once, kept durably until a turn consumer is done.

A webhook verifies its signature, reads only what it must (the vendor's delivery id and the
chat the message belongs to) and calls ``Inbox.push``: one Lua script claims the delivery id
(``SET NX``), takes the delivery's place in its chat's order (``INCR``) and appends the raw
payload to a Redis stream — one round trip, then the vendor gets its 200. Turn consumers
(``gateway.inbox.consumer``, in the gateway or in ``switchboard worker``) parse, persist and
answer it later; an entry leaves the stream only when its turn has finished, so a process that
dies mid-turn loses nothing. What cannot be processed is moved to a dead-letter stream with the
reason, never dropped.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from gateway.conversation.store import DEDUP_TTL_S, RedisStore
from gateway.conversation.turn_lock import TurnLock
from gateway.inbox.delivery import Delivery
from gateway.inbox.retries import Retries, RetryWindow
from gateway.turn.pipeline import Turn
from gateway.turn.reply_intent import Fence

__all__ = ["Delivery", "Inbox", "GROUP"]  # Delivery: see gateway.inbox.delivery

GROUP = "turns"
ACCEPTED_TTL_S = 24 * 3600
REPLY_VIA_TTL_S = 30 * 24 * 3600  # an operator can still answer a month-old conversation
DEAD_LETTERS_KEPT = 10_000  # the oldest beyond this are trimmed

# KEYS: seen, order ticket, stream, order serving   ARGV: seen ttl, channel, dedup id, order key, body
# The ticket is taken as TAKE_TICKET does: the chat's order keys stop expiring while it has work.
_PUSH = """
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  return 0
end
local ticket = redis.call('INCR', KEYS[2])
redis.call('PERSIST', KEYS[2])
redis.call('PERSIST', KEYS[4])
redis.call('XADD', KEYS[3], '*', 'c', ARGV[2], 'd', ARGV[3], 'k', ARGV[4], 't', ticket, 'b', ARGV[5])
return ticket
"""

# The consumer group's pending list names each entry's owner: a consumer that stalled past the reclaim
# time may have lost its entry to another, and then must neither renew, acknowledge nor finish it.
_OWNS = """
local function owns(stream, group, entry, consumer)
  local pending = redis.call('XPENDING', stream, group, entry, entry, 1)
  return #pending == 1 and pending[1][2] == consumer
end
"""

# KEYS: stream   ARGV: group, consumer, entry ids...   -> the ids this consumer no longer owns
_KEEP = _OWNS + """
local lost = {}
for i = 3, #ARGV do
  if owns(KEYS[1], ARGV[1], ARGV[i], ARGV[2]) then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
  else
    table.insert(lost, ARGV[i])
  end
end
return lost
"""

# KEYS: stream, accepted   ARGV: group, consumer, entry id   -> 0 when another consumer owns it now
_DONE = _OWNS + """
if not owns(KEYS[1], ARGV[1], ARGV[3], ARGV[2]) then
  return 0
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
redis.call('DEL', KEYS[2])
return 1
"""


@dataclass
class InboxStats:
    length: int = 0
    pending: int = 0
    dead: int = 0
    consumers: list[dict[str, Any]] = field(default_factory=list)


class Inbox:
    def __init__(self, redis: Redis, store: RedisStore, *, order_lease_s: float = 30.0,
                 order_grace_s: float = 10.0, order_idle_ttl_s: float = 24 * 3600,
                 retry_window: RetryWindow = RetryWindow()) -> None:
        self.redis = redis
        self.store = store
        self.stream = store.key("inbox")
        self.dead_stream = store.key("inbox", "dead")
        # Deliveries of one chat are accepted in arrival order, whichever process consumes them.
        self.order = TurnLock(redis, store.key("inbox", ""), lease_s=order_lease_s, grace_s=order_grace_s,
                               idle_ttl_s=order_idle_ttl_s)
        self._push = redis.register_script(_PUSH)
        self._keep = redis.register_script(_KEEP)
        self._done = redis.register_script(_DONE)
        self.retries = Retries(redis, store, self.stream, retry_window)  # deliveries waiting out a vendor outage

    # -- the webhook side ------------------------------------------------------------------------
    async def push(self, channel: str, dedup_id: str, order_key: str, body: str | bytes) -> bool:
        """Queue a verified delivery; False when this delivery id was already queued (a vendor retry)."""
        ticket_key, serving_key = self.order.order_keys(order_key)
        ticket = await self._push(
            keys=[self.store.dedup_key("inbox", channel, dedup_id), ticket_key, self.stream, serving_key],
            args=[DEDUP_TTL_S, channel, dedup_id, order_key, body],
        )
        return int(ticket) > 0

    # -- the consumer side -----------------------------------------------------------------------
    async def ensure_group(self) -> None:
        try:
            await self.redis.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def read(self, consumer: str, count: int, block_ms: int) -> list[Delivery]:
        answer = await self.redis.xreadgroup(GROUP, consumer, {self.stream: ">"}, count=count, block=block_ms)
        return [Delivery.from_entry(entry_id, fields) for _, entries in answer or () for entry_id, fields in entries]

    async def reclaim(self, consumer: str, idle_ms: int, count: int,
                      start: str = "0-0") -> tuple[list[Delivery], str]:
        """Entries whose consumer went quiet for ``idle_ms`` (it died, or handed them back), and where
        the next scan of the pending list starts ("0-0" once it has been scanned to the end)."""
        # redis-py hands the server's reply through as it comes: Redis 7 answers [cursor, claimed,
        # deleted ids] and drops deleted entries from the pending list itself; Redis 6.2 (the embedded
        # default) answers [cursor, claimed] with each deleted entry as (None, None), skipped below.
        # Our own deletes acknowledge in the same transaction, so only an outside XDEL leaves one.
        reply = await self.redis.xautoclaim(
            self.stream, GROUP, consumer, min_idle_time=idle_ms, start_id=start, count=count
        )
        cursor, claimed = reply[0], reply[1]
        cursor = cursor.decode() if isinstance(cursor, bytes) else str(cursor)
        live = [(entry_id, fields) for entry_id, fields in claimed if fields]
        if not live:
            return [], cursor
        rows = await self.redis.xpending_range(self.stream, GROUP, min=live[0][0], max=live[-1][0],
                                               count=len(live) * 4, consumername=consumer)
        counts = {row["message_id"]: int(row["times_delivered"]) for row in rows}
        return [Delivery.from_entry(entry_id, fields, counts.get(entry_id, 2)) for entry_id, fields in live], cursor

    async def keep(self, consumer: str, entry_ids: list[str]) -> list[str]:
        """Tell the group these entries are still being worked on (resets their idle time); returns the
        ones another consumer took over meanwhile (this one stalled past the reclaim time), left alone."""
        if not entry_ids:
            return []
        lost = await self._keep(keys=[self.stream], args=[GROUP, consumer, *entry_ids])
        return [entry.decode() if isinstance(entry, bytes) else str(entry) for entry in lost]

    def fence(self, delivery: Delivery, consumer: str) -> Fence:
        """What a turn checks before it sends: that ``consumer`` still owns the delivery."""
        return Fence(self.stream, GROUP, delivery.id, consumer)

    async def hand_back(self, entry_ids: list[str]) -> None:
        """Make entries this process cannot finish (it is stopping) claimable by the next consumer now."""
        if entry_ids:
            await self.redis.xclaim(self.stream, GROUP, "handed-back", 0, entry_ids, idle=10**9, justid=True)

    async def done(self, delivery: Delivery, consumer: str | None = None) -> bool:
        """Acknowledge a finished delivery; with ``consumer``, only while it still owns the entry (False
        when another consumer took it over)."""
        if consumer is not None:
            return bool(await self._done(keys=[self.stream, self._accepted_key(delivery.id)],
                                         args=[GROUP, consumer, delivery.id]))
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.xack(self.stream, GROUP, delivery.id)
            pipe.xdel(self.stream, delivery.id)
            pipe.delete(self._accepted_key(delivery.id))
            await pipe.execute()
        return True

    def done_into(self, pipe, delivery: Delivery, consumer: str) -> None:
        """Queue ``done(delivery, consumer)`` in ``pipe`` (its turn's closing round trip)."""
        pipe.eval(_DONE, 2, self.stream, self._accepted_key(delivery.id), GROUP, consumer, delivery.id)

    async def dead_letter(self, delivery: Delivery, error: str) -> None:
        """Park a delivery that cannot be processed, with the reason, where an operator can see it."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.xadd(self.dead_stream, {
                **delivery.fields(), "entry": delivery.id, "attempts": delivery.attempts, "error": error[:2000],
                "at": int(time.time()),
            }, maxlen=DEAD_LETTERS_KEPT, approximate=True)
            pipe.xack(self.stream, GROUP, delivery.id)
            pipe.xdel(self.stream, delivery.id)
            pipe.delete(self._accepted_key(delivery.id))
            await pipe.execute()
        await self.order.pass_ticket(delivery.order_key, delivery.ticket)  # its chat's next delivery goes on

    # -- an accepted turn survives its consumer --------------------------------------------------
    def _accepted_key(self, entry_id: str) -> str:
        return self.store.key("inbox", "accepted", entry_id)

    async def save_accepted(self, delivery: Delivery, turn: Turn) -> None:
        """The accepted turn (to resume it after a crash) and, for an operator who takes the
        conversation over later, the delivery its replies can be addressed from."""
        pipe = self.redis.pipeline(transaction=False)
        self.save_accepted_into(pipe, delivery, turn)
        await pipe.execute()

    def save_accepted_into(self, pipe, delivery: Delivery, turn: Turn) -> None:
        pipe.set(self._accepted_key(delivery.id), turn.snapshot(), ex=ACCEPTED_TTL_S)
        pipe.set(self.store.key("conv", turn.conversation.id, "reply_via"),
                 json.dumps({"id": delivery.id, **delivery.fields()}), ex=REPLY_VIA_TTL_S)

    async def reply_via(self, conversation_id: str) -> Delivery | None:
        """The conversation's newest delivery: where a reply to it goes (see ``InboxHandler.sink_for``)."""
        raw = await self.redis.get(self.store.key("conv", conversation_id, "reply_via"))
        if raw is None:
            return None
        fields = json.loads(raw)
        return Delivery.from_entry(fields.pop("id"), {k.encode(): str(v).encode() for k, v in fields.items()})

    async def accepted(self, delivery: Delivery) -> Turn | None:
        """The turn an earlier consumer accepted for this delivery before it went away, if any."""
        raw = await self.redis.get(self._accepted_key(delivery.id))
        return None if raw is None else Turn.restore(raw)

    # -- operators -------------------------------------------------------------------------------
    async def stats(self) -> InboxStats:
        stats = InboxStats(length=int(await self.redis.xlen(self.stream)),
                           dead=int(await self.redis.xlen(self.dead_stream)))
        try:
            summary = await self.redis.xpending(self.stream, GROUP)
        except ResponseError:  # no consumer group yet: nothing has been consumed
            return stats
        stats.pending = int(summary["pending"])
        stats.consumers = [{"name": c["name"].decode() if isinstance(c["name"], bytes) else c["name"],
                            "pending": int(c["pending"])} for c in summary["consumers"]]
        return stats

    async def retry_dead(self, dead_id: str) -> bool:
        """Queue a dead letter again (after the operator fixed its cause); False if there is no such entry."""
        rows = await self.redis.xrange(self.dead_stream, min=dead_id, max=dead_id)
        if not rows:
            return False
        dead = Delivery.from_entry(dead_id, rows[0][1])
        ticket = await self.order.take_ticket(dead.order_key)  # it goes to the back of its chat's order
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.xadd(self.stream, {**dead.fields(), "t": ticket})
            pipe.xdel(self.dead_stream, dead_id)
            await pipe.execute()
        return True

    async def dead_letters(self, count: int = 50) -> list[dict[str, str]]:
        rows = await self.redis.xrevrange(self.dead_stream, count=count)
        return [{"id": entry_id.decode(), **{k.decode(): v.decode(errors="replace") for k, v in fields.items()}}
                for entry_id, fields in rows]

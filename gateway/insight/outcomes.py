"""What a turn and a conversation count: tokens and cost of the turn's model call, the conversation's
start, and its outcomes (handed off, unanswered, resolved) once each.

A turn's counts are queued in its closing round trip (``TurnPipeline.turn_writes``) as one Lua call,
so they cost the turn no extra round trip and an outcome is counted once however many turns see it."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from datetime import date, datetime
from functools import partial
from typing import TYPE_CHECKING

from gateway.conversation.outcome_index import OUTCOMES as INDEXED
from gateway.conversation.outcome_index import OutcomeIndex
from gateway.conversation.store import RedisStore
from gateway.core.events import ConversationEnded, TurnCompleted
from gateway.core.metrics import Metrics
from gateway.core.models import Conversation, EndReason, TurnTrace, utcnow
from gateway.core.settings import Settings
from gateway.insight.counters import DailyCounters, Dims
from gateway.insight.prices import PriceTable
from gateway.insight.trace_cost import TraceCost, turn_cost
from gateway.insight.usage import meter
from gateway.insight.webhooks import Webhooks
from rag_core.tokenizer import tokenize

if TYPE_CHECKING:
    from gateway.turn.pipeline import Turn

__all__ = ["CONVERSATION_TTL_S", "OUTCOMES", "Outcomes", "TraceCost", "gap_group", "turn_cost"]

log = logging.getLogger(__name__)

CONVERSATION_TTL_S = 14 * 86_400  # a conversation's outcome flags outlive any idle window
GAP_EXAMPLES = 5
MAX_UNMETERED = 10_000
METER_EVERY_S = 5.0  # how soon an outcome a turn set is on /metrics
_RESOLVED_ON = {EndReason.TIMEOUT, EndReason.CALL_ENDED}

# KEYS: the day's counters, the conversation's flags, the day's gap groups, the group's examples, its offered
#       topics, the set of (agent, channel, connection) seen, the day's gap groups whatever the dims, then
#       the outcome index's sets (``OutcomeIndex.keys``)
# ARGV: dims suffix, started, handoff, unanswered, prompt, completion, cost (nano), unpriced tokens,
#       flags TTL, counters TTL, gap member, example, offered topics (JSON list), hour of the day (HH),
#       the conversation's id and its activity (epoch seconds)
_RECORD = """
local h, conv, d = KEYS[1], KEYS[2], ARGV[1]
local function add(name, n)  -- at this (agent, channel, connection), and in the day's total
  redis.call('HINCRBY', h, name .. d, n)
  redis.call('HINCRBY', h, name, n)
end
add('turns', 1)
add('turns@' .. ARGV[14], 1)
redis.call('SADD', KEYS[6], d)
if ARGV[2] == '1' then add('conversations', 1) end
redis.call('HSET', conv, 'dims', d)
if ARGV[3] == '1' and redis.call('HSETNX', conv, 'handed_off', 1) == 1 then add('handed_off', 1) end
if ARGV[4] == '1' and redis.call('HSETNX', conv, 'unanswered', 1) == 1 then add('unanswered', 1) end
local names = {'prompt', 'completion', 'cost_nano', 'unpriced'}
for i = 1, 4 do
  local n = tonumber(ARGV[4 + i])
  if n and n ~= 0 then add(names[i], n) end
end
redis.call('EXPIRE', conv, tonumber(ARGV[9]))
redis.call('EXPIRE', h, tonumber(ARGV[10]))
if ARGV[4] == '1' and ARGV[11] ~= '' then
  redis.call('ZINCRBY', KEYS[3], 1, ARGV[11])
  redis.call('EXPIRE', KEYS[3], tonumber(ARGV[10]))
  redis.call('ZINCRBY', KEYS[7], 1, ARGV[11])  -- the day's total, for a report without filters
  redis.call('EXPIRE', KEYS[7], tonumber(ARGV[10]))
  redis.call('LPUSH', KEYS[4], ARGV[12])
  redis.call('LTRIM', KEYS[4], 0, LAST_EXAMPLE)
  redis.call('EXPIRE', KEYS[4], tonumber(ARGV[10]))
  for _, topic in ipairs(cjson.decode(ARGV[13])) do redis.call('SADD', KEYS[5], topic) end
  redis.call('EXPIRE', KEYS[5], tonumber(ARGV[10]))
end
-- the conversation's outcomes so far, filed (again) at its activity for the conversation list's filter
local at = tonumber(ARGV[16])
for i, name in ipairs(cjson.decode(OUTCOME_NAMES)) do
  if redis.call('HEXISTS', conv, name) == 1 then
    redis.call('ZADD', KEYS[7 + i], at, ARGV[15])
    redis.call('ZREMRANGEBYSCORE', KEYS[7 + i], '-inf', at - tonumber(ARGV[9]))
  end
end
return 1
""".replace("LAST_EXAMPLE", str(GAP_EXAMPLES - 1)).replace("OUTCOME_NAMES", repr(json.dumps(list(INDEXED))))


# KEYS: the day's counters, the conversation's flags, the set of (agent, channel, connection) seen, the outcome
# index's abandoned set. ARGV: dims suffix, flags TTL, counters TTL, the conversation's id and activity (epoch s).
# A conversation the customer left mid-answer, counted once.
_ABANDONED = """
if redis.call('HSETNX', KEYS[2], 'abandoned', 1) == 1 then
  redis.call('HINCRBY', KEYS[1], 'abandoned' .. ARGV[1], 1)
  redis.call('HINCRBY', KEYS[1], 'abandoned', 1)
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
  redis.call('SADD', KEYS[3], ARGV[1])
end
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[2]))
redis.call('ZADD', KEYS[4], tonumber(ARGV[5]), ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', tonumber(ARGV[5]) - tonumber(ARGV[2]))
return 1
"""


OUTCOMES = tuple(INDEXED)  # as the conversation's flags name them


def gap_group(question: str) -> tuple[str, str]:
    """The group an unanswered question falls in (its content words, stemmed, in order of first use)
    and the group's id. Differently worded questions with the same words share one group."""
    words = list(dict.fromkeys(tokenize(question)))
    group = " ".join(sorted(words)) or " ".join(question.lower().split())[:200]
    return group, hashlib.sha1(group.encode()).hexdigest()[:12]


# KEYS: the conversation's flags. ARGV: the outcomes. Which outcomes are set and not yet on /metrics (each is
# put there once per conversation, by whichever replica sees it first), and the conversation's dims.
_METER = """
local out = {}
for _, name in ipairs(ARGV) do
  if redis.call('HEXISTS', KEYS[1], name) == 1 and redis.call('HSETNX', KEYS[1], 'metered:' .. name, 1) == 1 then
    out[#out + 1] = name
  end
end
return {redis.call('HGET', KEYS[1], 'dims') or '', out}
"""


class Outcomes:
    def __init__(self, settings: Settings, store: RedisStore, counters: DailyCounters, prices: PriceTable,
                 metrics: Metrics, webhooks: Webhooks | None = None) -> None:
        self.settings = settings
        self.webhooks = webhooks
        self.store = store
        self.counters = counters
        self.prices = prices
        self.metrics = metrics
        self.index = OutcomeIndex(store)
        self._closing: set[str] = set()  # conversations whose closing turn may set an outcome (for /metrics)
        self._unmetered: set[str] = set()  # ... whose turn completed: counted on /metrics in the next batch
        self._metering: asyncio.Task | None = None
        self._phrases = [p.strip().lower() for p in settings.unanswered_phrases.split("|") if p.strip()]

    def conversation_key(self, conversation_id: str) -> str:
        return self.store.key("insight", "conv", conversation_id)

    def gaps_key(self, day: date, suffix: str) -> str:
        """A day's unanswered questions at one (agent, channel, connection) (``suffix`` "": at any): gap group
        id -> count."""
        return self.store.key("insight", "gaps", day.strftime("%Y%m%d")) + suffix

    def gap_key(self, gap_id: str, part: str) -> str:
        return self.store.key("insight", "gap", gap_id, part)

    # -- a turn ------------------------------------------------------------------------------------
    def turn_into(self, pipe, turn: Turn) -> None:
        """Queue the turn's counts in its closing round trip. Never raises: a turn is not failed by its
        own bookkeeping (what could not be counted is logged)."""
        try:
            self._turn_into(pipe, turn)
        except Exception:
            log.exception("insight: turn %s not counted", turn.trace.turn_id)

    def _turn_into(self, pipe, turn: Turn) -> None:
        trace = turn.trace
        dims = Dims.of(trace.agent, trace.channel, trace.connection)
        prompt, completion, cost, unpriced = turn_cost(trace, self.prices)
        unanswered = self.unanswered(trace)
        member = example = ""
        offered: list[str] = []
        if unanswered:
            group, gap_id = gap_group(turn.inbound.text)
            member, example = gap_id, turn.inbound.text[:500]
            pipe.set(self.gap_key(gap_id, "group"), group, ex=self.counters.ttl_s)
            offered = [c.source for c in (trace.retrieval.candidates if trace.retrieval else [])[:3]]
        now = utcnow()
        gap_id = member[:12]
        pipe.eval(
            _RECORD, 7 + len(INDEXED), self.counters.key(now.date()), self.conversation_key(trace.conversation_id),
            self.gaps_key(now.date(), dims.suffix), self.gap_key(gap_id, "examples"), self.gap_key(gap_id, "offered"),
            self.counters.dims_key, self.gaps_key(now.date(), ""), *self.index.keys,
            dims.suffix, int(turn.started), int(bool(trace.handoff)), int(unanswered), prompt, completion,
            cost, unpriced, CONVERSATION_TTL_S, self.counters.ttl_s,
            member, example, json.dumps(offered), f"{now.hour:02d}",
            trace.conversation_id, turn.conversation.last_activity_at.timestamp(),
        )
        if trace.api_key:
            self.counters.add_key_into(pipe, now, trace.api_key, {"turns": 1, "prompt": prompt,
                                                                  "completion": completion, "cost_nano": cost})
        if unanswered or trace.handoff:
            self._mark_unmetered(trace.conversation_id)
        if self.webhooks is not None:
            self._events_into(pipe, turn, unanswered)
        meter(self.metrics, dims, prompt, completion, cost)

    def _events_into(self, pipe, turn: Turn, unanswered: bool) -> None:
        """The turn's webhook events, queued in its closing round trip (nothing when no webhook takes them)."""
        assert self.webhooks is not None
        trace = turn.trace
        emit = partial(self.webhooks.emit_into, pipe, conversation_id=trace.conversation_id, agent=trace.agent)
        where = {"turn_id": trace.turn_id, "channel": trace.channel, "connection": trace.connection}
        if trace.handoff:
            emit("conversation.handoff_requested", data={**where, "reason": trace.handoff})
        if unanswered:
            emit("conversation.unanswered", data={**where, "question": turn.inbound.text[:500],
                                                  "reply": (trace.reply or "")[:500]})
        for call in trace.tool_calls:
            if call.error and not call.reused:
                emit("tool.failed", data={**where, "tool": call.name, "error": call.error[:500]})

    def abandoned_into(self, pipe, turn: Turn) -> None:
        """Queue, in the turn's closing round trip, that its customer left before the reply was finished
        (counted once per conversation)."""
        trace = turn.trace
        if not trace.abandoned:
            return
        self._mark_unmetered(trace.conversation_id)
        dims = Dims.of(trace.agent, trace.channel, trace.connection)
        pipe.eval(*self._abandoned(trace.conversation_id, dims.suffix, turn.conversation.last_activity_at))

    async def left_after_turn(self, conversation_id: str) -> None:
        """The customer left before a finished turn's reply reached them (a caller who hung up before it was
        spoken): abandoned, counted once, at the (agent, channel, connection) of the conversation's turns
        (nothing for a conversation the bot never answered)."""
        dims = await self.store.redis.hget(self.conversation_key(conversation_id), "dims")
        if dims is None:
            return
        await self.store.redis.eval(*self._abandoned(conversation_id, dims.decode(), utcnow()))
        await self.meter(conversation_id)

    def _mark_unmetered(self, conversation_id: str) -> None:
        if len(self._closing) >= MAX_UNMETERED:  # turns that never completed: their outcomes wait for the next
            self._closing.clear()
        self._closing.add(conversation_id)

    async def on_turn_completed(self, event: TurnCompleted) -> None:
        """A turn that may have set an outcome: put it on /metrics within ``METER_EVERY_S``, together with every
        other such turn's (one round trip for all of them, after their turns, not one in each turn)."""
        if event.conversation_id not in self._closing:
            return
        self._closing.discard(event.conversation_id)  # its closing round trip has run: its flags are set
        self._unmetered.add(event.conversation_id)
        if self._metering is not None:
            return
        self._metering = asyncio.create_task(self._meter_pending(), name="insight-meter")

    async def _meter_pending(self) -> None:
        stopped = False
        try:
            await asyncio.sleep(METER_EVERY_S)
            pending, self._unmetered = self._unmetered, set()
            async with self.store.redis.pipeline(transaction=False) as pipe:
                for conversation_id in pending:
                    pipe.eval(_METER, 1, self.conversation_key(conversation_id), *OUTCOMES)
                answers = await pipe.execute(raise_on_error=False)
            for answer in answers:
                if not isinstance(answer, Exception):
                    self._count(answer, None)
        except asyncio.CancelledError:
            stopped = True
            raise
        except Exception as exc:  # Redis away: those outcomes reach /metrics with the conversation's next event
            log.warning("insight: outcomes not put on /metrics (%s)", exc)
        finally:
            self._metering = None
            if self._unmetered and not stopped:  # turns that finished while this batch was being counted
                self._metering = asyncio.create_task(self._meter_pending(), name="insight-meter")

    async def stop(self) -> None:
        if self._metering is not None:
            self._metering.cancel()
            await asyncio.gather(self._metering, return_exceptions=True)

    async def meter(self, conversation_id: str, fallback: Dims | None = None) -> None:
        """The conversation's outcomes not yet on /metrics, counted there (once per conversation), at its turns'
        dims (``fallback``: a conversation the bot never answered)."""
        self._count(await self.store.redis.eval(_METER, 1, self.conversation_key(conversation_id), *OUTCOMES),
                    fallback)

    def _count(self, answer: list, fallback: Dims | None) -> None:
        dims, names = answer
        where = Dims.parse(dims.decode()) if dims or fallback is None else fallback
        for name in names:
            self.metrics.insight_outcomes.labels(where.agent, where.channel, name.decode()).inc()

    def _abandoned(self, conversation_id: str, suffix: str, active_at: datetime) -> tuple:
        """``_ABANDONED``'s script, keys and arguments."""
        return (_ABANDONED, 4, self.counters.key(utcnow().date()), self.conversation_key(conversation_id),
                self.counters.dims_key, self.index.key("abandoned"), suffix, CONVERSATION_TTL_S, self.counters.ttl_s,
                conversation_id, active_at.timestamp())

    def unanswered(self, trace: TurnTrace) -> bool:
        """The agent said it did not know, or retrieval found nothing above the threshold."""
        if trace.responder in ("handoff", "fallback", "resumed", "interrupted") or trace.suppressed:
            return False
        reply = (trace.reply or "").lower()
        if trace.responder == "offline" and trace.reply == self.settings.offline_unknown_message:
            return True
        if any(phrase in reply for phrase in self._phrases):
            return True
        retrieval = trace.retrieval
        if retrieval is not None and retrieval.skipped is None and retrieval.strategy != "agentic":
            return not retrieval.selected
        searches = [c for c in trace.tool_calls if c.name == "query_knowledge"]
        return bool(searches) and all(c.result_count == 0 for c in searches)

    # -- a conversation ----------------------------------------------------------------------------
    async def of(self, conversation_id: str) -> list[str]:
        """The conversation's outcomes so far, in ``OUTCOMES`` order (none while the bot answers on)."""
        flags = await self.store.redis.hgetall(self.conversation_key(conversation_id))
        return [name for name in OUTCOMES if name.encode() in flags]

    async def handed_off(self, conversation: Conversation) -> None:
        """An operator took the conversation over from the console (counted once, like a requested handoff)."""
        key = self.conversation_key(conversation.id)
        pipe = self.store.redis.pipeline(transaction=False)
        pipe.hsetnx(key, "handed_off", 1)
        pipe.hget(key, "dims")
        pipe.expire(key, CONVERSATION_TTL_S)
        self.index.add_into(pipe, "handed_off", conversation.id, utcnow().timestamp(), CONVERSATION_TTL_S)
        first, dims, *_ = await pipe.execute()
        if first:
            found = Dims.parse(dims.decode()) if dims else Dims.of(None, conversation.channel, conversation.connection)
            await self.counters.add(utcnow(), found, {"handed_off": 1})
            await self.meter(conversation.id, found)

    async def on_conversation_ended(self, event: ConversationEnded) -> None:
        """Idle past the window (or the call ended) with no handoff and no 👎 standing: resolved."""
        if event.reason not in _RESOLVED_ON:
            return
        key = self.conversation_key(event.conversation.id)
        pipe = self.store.redis.pipeline(transaction=False)
        pipe.hsetnx(key, "ended", 1)
        pipe.hgetall(key)
        first, flags = await pipe.execute()
        flags = {k.decode(): v.decode() for k, v in flags.items()}
        if not first or "dims" not in flags:  # ended before (another replica), or never answered by the bot
            return
        if "handed_off" in flags or int(flags.get("down", "0")) > 0:
            return
        dims = Dims.parse(flags["dims"])
        pipe = self.store.redis.pipeline(transaction=False)
        pipe.hset(key, "resolved", 1)  # for the export and the conversation list
        self.index.add_into(pipe, "resolved", event.conversation.id,
                            event.conversation.last_activity_at.timestamp(), CONVERSATION_TTL_S)
        self.counters.add_into(pipe, at_or_now(event.conversation.ended_at), dims, {"resolved": 1})
        if self.webhooks is not None:
            self.webhooks.emit_into(pipe, "conversation.resolved", event.conversation.id,
                                    {"channel": event.conversation.channel, "reason": event.reason.value,
                                     "connection": dims.connection or None}, agent=dims.agent)
        await pipe.execute()
        await self.meter(event.conversation.id)


def at_or_now(at: datetime | None) -> datetime:
    return at or utcnow()

"""Who answers a conversation: the bot, or a person from the console.

A conversation is *handed off* when an operator takes it over ("human") or when the user (or the
model) asked for a person and nobody has taken it yet ("waiting"). While it is handed off the bot
sends nothing. The one rule that matters — never two answers to one user message — is kept by a
gate: a bot reply is delivered only while it holds the conversation's gate, which it can take only
while the conversation is not handed off; taking over waits for a held gate to be let go. So a bot
reply is either delivered before the take-over (and the operator sees it) or not at all.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Literal

from gateway.conversation.store import RedisStore
from gateway.core.errors import Conflict

HandoffStatus = Literal["waiting", "human"]

# KEYS: gate. ARGV: holder.
_RELEASE_GATE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
# KEYS: state, index. ARGV: touched-before (0 = unconditionally). 1 = handed back.
_HAND_BACK = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if tonumber(ARGV[1]) > 0 and tonumber(redis.call('HGET', KEYS[1], 'touched') or '0') >= tonumber(ARGV[1]) then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
return 1
"""
# KEYS: state. ARGV: summary. Only while the conversation is handed off (a summary never makes one).
_NOTE_SUMMARY = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'summary', ARGV[1])
return 1
"""
# KEYS: state, index. ARGV: conversation id, operator, now. Refuses another operator's conversation.
_TAKE_OVER = """
local holder = redis.call('HGET', KEYS[1], 'operator')
if holder and holder ~= '' and holder ~= ARGV[2] then return holder end
redis.call('HSET', KEYS[1], 'status', 'human', 'operator', ARGV[2], 'touched', ARGV[3])
redis.call('HSETNX', KEYS[1], 'since', ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return ''
"""


@dataclass(frozen=True)
class Handoff:
    conversation_id: str
    status: HandoffStatus
    operator: str | None
    since: float
    touched: float
    reason: str | None = None
    summary: str | None = None  # what the person taking over should know first (a phone transfer's two lines)


class Handoffs:
    def __init__(self, store: RedisStore, gate_ttl_s: float = 30.0) -> None:
        self.store = store
        self.redis = store.redis
        self.gate_ttl_ms = int(gate_ttl_s * 1000)
        self._release_gate = self.redis.register_script(_RELEASE_GATE)
        self._hand_back = self.redis.register_script(_HAND_BACK)
        self._take_over = self.redis.register_script(_TAKE_OVER)
        self._note_summary = self.redis.register_script(_NOTE_SUMMARY)

    def _state_key(self, conversation_id: str) -> str:
        return self.store.key("handoff", conversation_id)

    def _gate_key(self, conversation_id: str) -> str:
        return self.store.key("handoff", conversation_id, "gate")

    @property
    def _index(self) -> str:
        return self.store.key("handoffs")

    async def get(self, conversation_id: str) -> Handoff | None:
        return _parse(conversation_id, await self.redis.hgetall(self._state_key(conversation_id)))

    def get_into(self, pipe, conversation_id: str) -> None:
        """Queue ``get``'s read in ``pipe``; ``parse`` its answer."""
        pipe.hgetall(self._state_key(conversation_id))

    @staticmethod
    def parse(conversation_id: str, raw: dict) -> Handoff | None:
        return _parse(conversation_id, raw)

    async def many(self, ids: list[str]) -> dict[str, Handoff]:
        if not ids:
            return {}
        # Only the index's members have a state: one ZMSCORE finds them, and only their states are read (a
        # page of a thousand ended conversations, of which none is handed off, is one command, not a thousand).
        scores = await self.redis.zmscore(self._index, ids)
        held = [i for i, score in zip(ids, scores, strict=True) if score is not None]
        if not held:
            return {}
        pipe = self.redis.pipeline(transaction=False)
        for conversation_id in held:
            pipe.hgetall(self._state_key(conversation_id))
        found = (_parse(i, raw) for i, raw in zip(held, await pipe.execute(), strict=True))
        return {h.conversation_id: h for h in found if h is not None}

    @property
    def index_key(self) -> str:
        """Every handed-off conversation, scored by its latest activity."""
        return self._index

    async def listed(self) -> list[str]:
        """Every handed-off conversation, most recently active first."""
        return [raw.decode() for raw in await self.redis.zrevrange(self._index, 0, -1)]

    async def request(self, conversation_id: str, reason: str) -> bool:
        """The user or the model asked for a person: waiting, unless it is handed off already."""
        now = time.time()
        key = self._state_key(conversation_id)
        if not await self.redis.hsetnx(key, "status", "waiting"):
            return False
        pipe = self.redis.pipeline(transaction=False)
        pipe.hset(key, mapping={"since": now, "touched": now, "reason": reason})
        pipe.zadd(self._index, {conversation_id: now})
        await pipe.execute()
        await self._announce(conversation_id, "waiting")
        return True

    async def note_summary(self, conversation_id: str, summary: str) -> bool:
        """Keep ``summary`` with a handed-off conversation (the console shows it); False when it is not
        handed off."""
        done = bool(await self._note_summary(keys=[self._state_key(conversation_id)], args=[summary]))
        if done:
            await self._announce(conversation_id, "waiting")
        return done

    async def take_over(self, conversation_id: str, operator: str, wait_s: float = 5.0) -> None:
        """``operator`` answers from now on; returns once no bot reply is being delivered."""
        holder = await self._take_over(
            keys=[self._state_key(conversation_id), self._index], args=[conversation_id, operator, time.time()]
        )
        if holder:
            raise Conflict(f"{holder.decode() if isinstance(holder, bytes) else holder} has already taken over "
                           "this conversation")
        await self._announce(conversation_id, "human")
        await self.wait_for_gate(conversation_id, wait_s)

    async def wait_for_gate(self, conversation_id: str, wait_s: float) -> None:
        """Wait (bounded) until a bot reply that passed the gate before the handoff has been delivered."""
        deadline = time.monotonic() + wait_s
        while await self.redis.exists(self._gate_key(conversation_id)) and time.monotonic() < deadline:  # noqa: ASYNC110 - the gate lives in Redis, not in this process
            await asyncio.sleep(0.05)

    async def touch(self, conversation_id: str) -> None:
        now = time.time()
        pipe = self.redis.pipeline(transaction=False)
        pipe.hset(self._state_key(conversation_id), "touched", now)
        pipe.zadd(self._index, {conversation_id: now}, xx=True)
        await pipe.execute()

    async def hand_back(self, conversation_id: str, *, idle_before: float = 0.0) -> bool:
        """The bot answers again; with ``idle_before``, only if nobody acted since then (the idle sweep)."""
        done = bool(await self._hand_back(
            keys=[self._state_key(conversation_id), self._index], args=[idle_before, conversation_id]
        ))
        if done:
            await self._announce(conversation_id, "bot")
        return done

    async def idle(self, cutoff: float) -> list[str]:
        return [raw.decode() for raw in await self.redis.zrangebyscore(self._index, "-inf", cutoff)]

    def gate_keys(self, conversation_id: str) -> tuple[str, str]:
        """The state and gate keys: a bot reply takes the gate with its intent, in one script, only while the
        state says nobody has the conversation (``gateway.turn.reply_intent``)."""
        return self._state_key(conversation_id), self._gate_key(conversation_id)

    async def release_gate(self, conversation_id: str, holder: str) -> None:
        await self._release_gate(keys=[self._gate_key(conversation_id)], args=[holder])

    def release_gate_into(self, pipe, conversation_id: str, holder: str) -> None:
        """Queue the gate's release in ``pipe`` (a turn's closing round trip)."""
        pipe.eval(_RELEASE_GATE, 1, self._gate_key(conversation_id), holder)

    async def _announce(self, conversation_id: str, status: str) -> None:
        await self.redis.publish(self.store.live_channel,
                                 json.dumps({"conversation_id": conversation_id, "handoff": status}))


def _parse(conversation_id: str, raw: dict) -> Handoff | None:
    if not raw:
        return None
    fields = {k.decode(): v.decode() for k, v in raw.items()}
    if fields.get("status") not in ("waiting", "human"):
        return None
    return Handoff(
        conversation_id=conversation_id,
        status=fields["status"],  # type: ignore[arg-type]
        operator=fields.get("operator") or None,
        since=float(fields.get("since") or 0),
        touched=float(fields.get("touched") or 0),
        reason=fields.get("reason") or None,
        summary=fields.get("summary") or None,
    )

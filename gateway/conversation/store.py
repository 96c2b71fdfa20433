"""Redis as the system of record: personas, conversations, messages, traces and dedup keys.

Every key lives under ``sb:<agent_id>:`` so several agents (and test runs) can share one Redis.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from gateway.conversation.search import ConversationSearch
from gateway.core.models import Conversation, Message, Persona, TurnTrace

DEDUP_TTL_S = 7 * 24 * 3600
LAST_TEXT_CHARS = 300  # how much of a conversation's last message its list row keeps
RECENT_TURNS = 5000  # finished turns kept for the console's overview (count per minute, p50/p99)
RECENT_RETRIEVALS = 20  # live retrievals kept for the console's retrieval test page


# A pointer and what it points at in one round trip (an identity's persona, a chat's active conversation):
# KEYS[1] the pointer; ARGV[1] the target key's prefix. Answers false, or {id, the target's value or false}.
_FOLLOW = """
local id = redis.call('GET', KEYS[1])
if not id then return false end
return {id, redis.call('GET', ARGV[1] .. id)}
"""

# A persona's newest messages, oldest first, in one round trip. KEYS[1] the persona's message index;
# ARGV: newest score, oldest score, how many, the message keys' prefix. MGET in slices: Lua's stack is small.
_NEWEST_MESSAGES = """
local ids = redis.call('ZREVRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[2], 'LIMIT', 0, ARGV[3])
local found = {}
local slice = {}
for i = #ids, 1, -1 do
  slice[#slice + 1] = ARGV[4] .. ids[i]
  if #slice == 500 or i == 1 then
    for _, raw in ipairs(redis.call('MGET', unpack(slice))) do
      if raw then found[#found + 1] = raw end
    end
    slice = {}
  end
end
return found
"""

# A message's arrival in one round trip: claim its dedup key, read its persona (through the identity
# pointer) and the persona's active conversation on its channel and thread, and take that conversation's
# next turn ticket (as TAKE_TICKET does; given back when the conversation turns out to have gone idle).
# KEYS[1] dedup key, KEYS[2] identity pointer. ARGV: owner ('' = none), dedup ttl s, persona key prefix,
# active-pointer suffix, conversation key prefix, ticket key prefix, ticket suffix, serving suffix.
# {0}: a repeat; {1, persona id, persona, conv id, conv, ticket}.
_ARRIVE = """
if not redis.call('SET', KEYS[1], ARGV[1] ~= '' and ARGV[1] or '1', 'NX', 'EX', ARGV[2]) then
  if ARGV[1] == '' or redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end
end
local pid = redis.call('GET', KEYS[2])
if not pid then return {1} end
local cid = redis.call('GET', ARGV[3] .. pid .. ARGV[4])
local conv = cid and redis.call('GET', ARGV[5] .. cid) or false
local ticket = false
if conv then
  ticket = redis.call('INCR', ARGV[6] .. cid .. ARGV[7])
  redis.call('PERSIST', ARGV[6] .. cid .. ARGV[7])
  redis.call('PERSIST', ARGV[6] .. cid .. ARGV[8])
end
return {1, pid, redis.call('GET', ARGV[3] .. pid), cid, conv, ticket}
"""

# What a dedup key guards: a message turned into a turn, a delivery queued in the inbox, a polled update.
DedupScope = Literal["msg", "inbox", "update"]


@dataclass(frozen=True)
class Arrival:
    """What ``RedisStore.arrive`` read: the persona (None: not yet known, resolve it), its active
    conversation on the message's channel and thread (None: none, or the persona is not known), and
    the ticket it took for that conversation (give it back if the message does not go there)."""

    persona: Persona | None
    conversation: Conversation | None
    ticket: int | None = None  # the next turn ticket of ``ticket_of``, taken in the same round trip
    ticket_of: str | None = None  # the conversation that ticket belongs to


class RedisStore:
    def __init__(self, redis: Redis, agent_id: str) -> None:
        self.redis = redis
        self.agent_id = agent_id
        self.prefix = f"sb:{agent_id}:"
        self._follow = redis.register_script(_FOLLOW)
        self._newest_messages = redis.register_script(_NEWEST_MESSAGES)
        self._arrive = redis.register_script(_ARRIVE)
        self.search = ConversationSearch(redis, self.key)

    async def _followed(self, pointer: str, target_prefix: str) -> tuple[str, bytes | None] | None:
        """(id, value) of what ``pointer`` names, value None when that is gone; None without a pointer."""
        answer = await self._follow(keys=[pointer], args=[target_prefix])
        if not answer:
            return None
        found_id, value = answer
        return found_id.decode(), value or None

    def key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    # -- dedup ---------------------------------------------------------------------------------
    def dedup_key(self, scope: DedupScope, channel: str, external_id: str) -> str:
        """The one layout of every "seen once" key: ``dedup:<scope>:<channel>:<vendor id>``."""
        return self.key("dedup", scope, channel, external_id)

    async def claim_once(self, scope: DedupScope, channel: str, external_id: str, ttl_s: int = DEDUP_TTL_S,
                         *, owner: str | None = None) -> bool:
        """True the first time this id is seen, False for every repeat (vendor retries). With ``owner`` (the
        inbox delivery that claims it), a claim made earlier by that same owner counts as its own: a
        delivery whose acceptance was cut off after the claim (Redis dropped the connection) is accepted
        when it is tried again, where any other delivery of the same message is a repeat."""
        key = self.dedup_key(scope, channel, external_id)
        if await self.redis.set(key, owner or "1", nx=True, ex=ttl_s):
            return True
        if owner is None:
            return False
        held = await self.redis.get(key)
        return (held.decode() if isinstance(held, bytes) else held) == owner

    async def arrive(self, channel: str, external_id: str, identity: str, thread: str | None,
                     ticket_keys: tuple[str, str, str], *, owner: str | None = None) -> Arrival | None:
        """``claim_once("msg", …)`` and, in the same round trip, the identity's persona, its active
        conversation on ``channel``/``thread`` and that conversation's next turn ticket (``ticket_keys``:
        ``TurnLock.ticket_key_parts``); None for a repeat."""
        answer = await self._arrive(
            keys=[self.dedup_key("msg", channel, external_id), self.key("identity", identity)],
            args=[owner or "", DEDUP_TTL_S, self.key("persona", ""),
                  ":" + ":".join(("active", channel, thread or "-")), self.key("conv", ""), *ticket_keys])
        if not int(answer[0]):
            return None
        if len(answer) == 1 or not answer[2]:  # a new identity (or a pointer to a persona being healed)
            ticket = int(answer[5]) if len(answer) > 5 and answer[5] else None
            return Arrival(None, None, ticket, answer[3].decode() if ticket is not None else None)
        persona = Persona.model_validate_json(answer[2])
        conversation = Conversation.model_validate_json(answer[4]) if answer[4] else None
        ticket = int(answer[5]) if answer[5] else None
        return Arrival(persona, conversation, ticket, conversation.id if conversation is not None else None)

    async def release_claim(self, scope: DedupScope, channel: str, external_id: str) -> None:
        await self.redis.delete(self.dedup_key(scope, channel, external_id))

    # -- personas ------------------------------------------------------------------------------
    async def resolve_persona(self, identity: str, display_name: str | None = None) -> Persona:
        """The persona owning ``identity``, created atomically on first sight."""
        id_key = self.key("identity", identity)
        found = await self._followed(id_key, self.key("persona", ""))  # the usual case: one round trip
        if found is None:
            candidate = Persona(identities=[identity], display_name=display_name)
            if await self.redis.set(id_key, candidate.id, nx=True):
                await self.save_persona(candidate)
                return candidate
            found = await self._followed(id_key, self.key("persona", ""))
            if found is None:  # created by another request and deleted again meanwhile: start over
                return await self.resolve_persona(identity, display_name)
        persona_id, raw = found
        if raw is None:  # identity key survived a partial write; heal it
            persona = Persona(id=persona_id, identities=[identity], display_name=display_name)
            await self.save_persona(persona)
            return persona
        return Persona.model_validate_json(raw)

    async def save_persona(self, persona: Persona) -> None:
        await self.redis.set(self.key("persona", persona.id), persona.model_dump_json())

    async def get_persona(self, persona_id: str) -> Persona | None:
        raw = await self.redis.get(self.key("persona", persona_id))
        return Persona.model_validate_json(raw) if raw else None

    async def get_personas(self, persona_ids: list[str]) -> list[Persona | None]:
        raws = await self.redis.mget([self.key("persona", i) for i in persona_ids]) if persona_ids else []
        return [Persona.model_validate_json(raw) if raw else None for raw in raws]

    # -- conversations -------------------------------------------------------------------------
    def _active_key(self, persona_id: str, channel: str, thread: str | None) -> str:
        return self.key("persona", persona_id, "active", channel, thread or "-")

    async def active_conversation(
        self, persona_id: str, channel: str, thread: str | None
    ) -> Conversation | None:
        found = await self._followed(self._active_key(persona_id, channel, thread), self.key("conv", ""))
        return Conversation.model_validate_json(found[1]) if found is not None and found[1] else None

    async def set_active(self, conversation: Conversation) -> None:
        key = self._active_key(conversation.persona_id, conversation.channel, conversation.thread)
        if conversation.active:
            await self.redis.set(key, conversation.id)
        else:
            await self.redis.delete(key)

    async def save_conversation(
        self, conversation: Conversation, *, activity_key: str | None = None, make_active: bool = False
    ) -> None:
        """Store the conversation (and, in the same round trip, its activity and active pointer)."""
        pipe = self.redis.pipeline(transaction=False)
        self.save_conversation_into(pipe, conversation, activity_key=activity_key, make_active=make_active)
        await pipe.execute()

    def save_conversation_into(self, pipe: Pipeline, conversation: Conversation, *, activity_key: str | None = None,
                               make_active: bool = False) -> None:
        pipe.set(self.key("conv", conversation.id), conversation.model_dump_json())
        pipe.zadd(
            self.key("persona", conversation.persona_id, "convs"),
            {conversation.id: conversation.started_at.timestamp()},
        )
        if activity_key is not None:
            pipe.zadd(activity_key, {conversation.id: conversation.last_activity_at.timestamp()})
        if make_active:
            pipe.set(self._active_key(conversation.persona_id, conversation.channel, conversation.thread),
                     conversation.id)

    async def get_conversation(self, conversation_id: str) -> Conversation | None:
        raw = await self.redis.get(self.key("conv", conversation_id))
        return Conversation.model_validate_json(raw) if raw else None

    # -- messages ------------------------------------------------------------------------------
    @property
    def live_channel(self) -> str:
        """The pub/sub channel every stored or updated message is announced on (console, web chat)."""
        return self.key("live")

    def _announce(self, pipe, message: Message) -> None:
        """List the conversation first (by its newest message), index its words for the search and tell
        live listeners, in ``pipe``."""
        ts = message.created_at.timestamp()
        row = json.dumps({
            "conversation_id": message.conversation_id, "message_id": message.id, "persona_id": message.persona_id,
            "role": message.role.value, "channel": message.channel, "at": ts,
            "delivery": message.delivery.value if message.delivery else None, "text": message.text[:LAST_TEXT_CHARS],
        })
        pipe.zadd(self.key("convs"), {message.conversation_id: ts})
        pipe.zadd(self.key("convs", "channel", message.channel), {message.conversation_id: ts})
        pipe.hset(self.key("convs", "last"), message.conversation_id, row)
        self.search.index_into(pipe, message.conversation_id, ts,
                               (message.text, message.conversation_id, message.persona_id))
        pipe.publish(self.live_channel, row)

    async def add_message(self, message: Message) -> None:
        pipe = self.redis.pipeline(transaction=False)
        self.add_message_into(pipe, message)
        await pipe.execute()

    def add_message_into(self, pipe: Pipeline, message: Message) -> None:
        """Queue ``add_message``'s writes in ``pipe`` (a turn's opening round trip)."""
        ts = message.created_at.timestamp()
        pipe.set(self.key("msg", message.id), message.model_dump_json())
        pipe.zadd(self.key("conv", message.conversation_id, "msgs"), {message.id: ts})
        pipe.zadd(self.key("persona", message.persona_id, "msgs"), {message.id: ts})
        self._announce(pipe, message)

    async def get_message(self, message_id: str) -> Message | None:
        raw = await self.redis.get(self.key("msg", message_id))
        return Message.model_validate_json(raw) if raw else None

    async def update_message(self, message: Message) -> None:
        """A stored message's new state (its delivery), announced like a new one."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(self.key("msg", message.id), message.model_dump_json())
        self._announce(pipe, message)
        await pipe.execute()

    async def conversation_messages(self, conversation_id: str, newest: int = 500) -> list[Message]:
        """The conversation's newest messages, oldest first."""
        ids = await self.redis.zrevrange(self.key("conv", conversation_id, "msgs"), 0, newest - 1)
        if not ids:
            return []
        raws = await self.redis.mget([self.key("msg", i.decode()) for i in reversed(ids)])
        return [Message.model_validate_json(raw) for raw in raws if raw]

    # -- the conversation list -----------------------------------------------------------------
    async def recent_conversation_ids(
        self, start: int, count: int, channel: str | None = None
    ) -> list[str]:
        """Conversations by their newest message, newest first."""
        key = self.list_key(channel)
        return [raw.decode() for raw in await self.redis.zrevrange(key, start, start + count - 1)]

    def list_key(self, channel: str | None = None) -> str:
        """The conversation list's index (of one channel's conversations), scored by their newest message."""
        return self.key("convs", "channel", channel) if channel else self.key("convs")

    async def conversation_rows(self, ids: list[str]) -> list[tuple[Conversation, dict]]:
        """Each conversation with its last message's row (as ``_announce`` wrote it), in ``ids``' order."""
        if not ids:
            return []
        pipe = self.redis.pipeline(transaction=False)
        pipe.mget([self.key("conv", i) for i in ids])
        pipe.hmget(self.key("convs", "last"), ids)
        convs, lasts = await pipe.execute()
        return [
            (Conversation.model_validate_json(conv), json.loads(last) if last else {})
            for conv, last in zip(convs, lasts, strict=True) if conv
        ]

    async def last_rows(self, ids: list[str]) -> list[dict]:
        raws = await self.redis.hmget(self.key("convs", "last"), ids) if ids else []
        return [json.loads(raw) if raw else {} for raw in raws]

    async def persona_messages(
        self,
        persona_id: str,
        *,
        newest: int,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[Message]:
        """Up to ``newest`` of the persona's messages across channels, oldest first (one round trip)."""
        raws = await self._newest_messages(keys=[self.key("persona", persona_id, "msgs")],
                                           args=self._newest_args(newest, since, until))
        return self.messages_of(raws)

    def persona_messages_into(self, pipe: Pipeline, persona_id: str, *, newest: int, since: datetime | None = None,
                              until: datetime | None = None) -> None:
        """Queue ``persona_messages``'s read in ``pipe``; ``messages_of`` its answer."""
        pipe.eval(_NEWEST_MESSAGES, 1, self.key("persona", persona_id, "msgs"),
                  *self._newest_args(newest, since, until))

    def _newest_args(self, newest: int, since: datetime | None, until: datetime | None) -> list:
        low = repr(since.timestamp()) if since else "-inf"
        high = repr(until.timestamp()) if until else "+inf"
        return [high, low, newest, self.key("msg", "")]

    @staticmethod
    def messages_of(raws: list[bytes]) -> list[Message]:
        return [Message.model_validate_json(raw) for raw in raws]

    async def finish_turn(
        self, message: Message, conversation: Conversation, trace: TurnTrace, activity_key: str,
        then: Sequence[Callable[[Pipeline], None]] = (),
    ) -> None:
        """A turn's closing writes in one round trip: the reply (stored with how its delivery went and
        indexed), the conversation's activity, the trace, the live feed — then whatever ``then`` queues
        (the handoff gate's and the turn lock's release), in that order."""
        ts = conversation.last_activity_at.timestamp()
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(self.key("msg", message.id), message.model_dump_json())
        sent = message.created_at.timestamp()
        pipe.zadd(self.key("conv", message.conversation_id, "msgs"), {message.id: sent})
        pipe.zadd(self.key("persona", message.persona_id, "msgs"), {message.id: sent})
        pipe.set(self.key("conv", conversation.id), conversation.model_dump_json())
        pipe.zadd(activity_key, {conversation.id: ts})
        self._put_trace(pipe, trace)
        self._count_turn(pipe, trace)
        self._announce(pipe, message)
        for queue in then:
            queue(pipe)
        await pipe.execute()

    async def finish_silent_turn(self, conversation: Conversation, trace: TurnTrace, activity_key: str,
                                 then: Sequence[Callable[[Pipeline], None]] = ()) -> None:
        """A turn that sent nothing (the conversation was handed off): its activity and trace, then
        whatever ``then`` queues, in one round trip."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(self.key("conv", conversation.id), conversation.model_dump_json())
        pipe.zadd(activity_key, {conversation.id: conversation.last_activity_at.timestamp()})
        self._put_trace(pipe, trace)
        self._count_turn(pipe, trace)
        for queue in then:
            queue(pipe)
        await pipe.execute()

    # -- traces --------------------------------------------------------------------------------
    async def save_trace(self, trace: TurnTrace) -> None:
        pipe = self.redis.pipeline(transaction=False)
        self._put_trace(pipe, trace)
        await pipe.execute()

    def save_trace_into(self, pipe: Pipeline, trace: TurnTrace) -> None:
        """Queue ``save_trace``'s writes in ``pipe``."""
        self._put_trace(pipe, trace)

    def _put_trace(self, pipe, trace: TurnTrace) -> None:
        """A trace saved again (a failure recorded, then the resumed turn) stays listed once."""
        listed = self.key("conv", trace.conversation_id, "traces")
        pipe.set(self.key("trace", trace.turn_id), trace.model_dump_json())
        pipe.lrem(listed, 0, trace.turn_id)
        pipe.rpush(listed, trace.turn_id)

    def _count_turn(self, pipe, trace: TurnTrace) -> None:
        """A finished turn in the recent-turns list (time, ms, responder, delivered) and, when it
        searched the knowledge base, in the recent-retrievals list."""
        failed = int(bool(trace.delivery_error))
        pipe.lpush(self.key("recent", "turns"),
                   f"{trace.started_at.timestamp():.3f} {trace.total_ms:.1f} {trace.responder} {failed}")
        pipe.ltrim(self.key("recent", "turns"), 0, RECENT_TURNS - 1)
        if trace.retrieval is not None:
            query = next((m.content for m in reversed(trace.prompt) if m.role == "user"), "")
            pipe.lpush(self.key("recent", "retrievals"), json.dumps({
                "turn_id": trace.turn_id, "conversation_id": trace.conversation_id, "channel": trace.channel,
                "at": trace.started_at.timestamp(), "query": query[:LAST_TEXT_CHARS],
                "strategy": trace.retrieval.strategy, "selected": trace.retrieval.selected[:10],
                "top": [[c.source, round(c.score, 4)] for c in trace.retrieval.candidates[:5]],
                "ms": trace.retrieval.timings_ms,
            }))
            pipe.ltrim(self.key("recent", "retrievals"), 0, RECENT_RETRIEVALS - 1)

    async def recent_turns(self) -> list[tuple[float, float, str, bool]]:
        """(started at, ms, responder, delivery failed) of the newest finished turns, newest first."""
        rows = []
        for raw in await self.redis.lrange(self.key("recent", "turns"), 0, -1):
            at, ms, responder, failed = raw.decode().split(" ")
            rows.append((float(at), float(ms), responder, failed == "1"))
        return rows

    async def recent_retrievals(self) -> list[dict]:
        return [json.loads(raw) for raw in await self.redis.lrange(self.key("recent", "retrievals"), 0, -1)]

    async def get_trace(self, turn_id: str) -> TurnTrace | None:
        raw = await self.redis.get(self.key("trace", turn_id))
        return TurnTrace.model_validate_json(raw) if raw else None

    async def conversation_traces(self, conversation_id: str, newest: int = 200) -> list[TurnTrace]:
        """The conversation's turn traces, oldest first."""
        ids = await self.redis.lrange(self.key("conv", conversation_id, "traces"), -newest, -1)
        if not ids:
            return []
        raws = await self.redis.mget([self.key("trace", i.decode()) for i in ids])
        return [TurnTrace.model_validate_json(raw) for raw in raws if raw]

"""The turn: dedup → persona → conversation → persist → context → prompt → reply → deliver → trace.

``accept`` does the part a webhook must finish before it acknowledges (dedup, persist the user
message, take the conversation's turn ticket); ``run`` does the rest and may happen later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Protocol

from pydantic import BaseModel
from redis.asyncio.client import Pipeline

from gateway.conversation.attributes import CONVERSATION_META
from gateway.conversation.handoff import Handoff, Handoffs
from gateway.conversation.memory import Memory
from gateway.conversation.sessions import Sessions
from gateway.conversation.store import RedisStore
from gateway.conversation.turn_lock import HeldTurn, TurnLock
from gateway.core.errors import LLMError
from gateway.core.events import EventBus, TurnCompleted
from gateway.core.logs import turn_context
from gateway.core.metrics import Metrics
from gateway.core.models import (
    Conversation,
    DeliveryStatus,
    InboundMessage,
    Message,
    Persona,
    Role,
    SourceRef,
    StageTiming,
    TurnTrace,
    new_id,
    utcnow,
)
from gateway.core.redis_tally import RedisTally, counting
from gateway.core.settings import Settings
from gateway.turn.citations import CitationPolicy, cite, deliverable, used_sources, with_instruction
from gateway.turn.cpu_slots import CpuSlots
from gateway.turn.llm import CallOptions, turn_model_calls
from gateway.turn.media_parts import TurnMedia
from gateway.turn.ports import (
    AssembledPrompt,
    Capabilities,
    DeliveryReport,
    IdempotentSink,
    PromptAssembler,
    PromptInputs,
    RagMode,
    RatedSink,
    ReplySink,
    TurnPlan,
)
from gateway.turn.reply_intent import Fence, Gate, HandedOff, PlannedReply, ReplyIntents, SendIntent
from gateway.turn.responders import KnowledgeHit, Reply, ReplyRequest, Responder
from gateway.turn.tools import ToolLoop, ToolState, TurnTools

log = logging.getLogger(__name__)

HANDOFF_MARKER = "[HANDOFF]"  # the model's way to ask for a person (SWITCHBOARD_HANDOFF_LLM_SIGNAL)
_USER_MESSAGE_IDS = uuid.UUID("9b1f3c52-5d7e-4a39-9e55-0c7f2d4b8a61")  # namespace of inbox messages' ids


def _stable_id(channel: str, delivery_id: str | None) -> dict[str, str]:
    """The user message's id for an inbox delivery: the same on every try, so a retry stores it once."""
    return {} if delivery_id is None else {"id": uuid.uuid5(_USER_MESSAGE_IDS, f"{channel}:{delivery_id}").hex}


RECENT_FOR_CONTEXT = 21  # the seed's RAG history (20 messages) plus the message being answered


@dataclass
class Turn:
    """Everything one turn knows; context preparers and the prompt builder read and add to it."""

    inbound: InboundMessage
    persona: Persona
    conversation: Conversation
    user_message: Message
    ticket: int
    started: bool
    trace: TurnTrace
    memory: list[Message] = field(default_factory=list)  # what the prompt shows
    recent: list[Message] = field(default_factory=list)  # a longer window, for context preparers
    rag: str = ""
    hits: list[KnowledgeHit] = field(default_factory=list)
    rag_mode: RagMode = "inline"
    agentic: bool = False  # the model searches with a tool (set by the RAG preparer); nothing was injected
    kbs: list[str] = field(default_factory=list)  # the knowledge bases it may search (empty: the default)
    citations: CitationPolicy | None = None  # set by the citations preparer; None: the reply is not checked
    sources: list[SourceRef] = field(default_factory=list)  # what the reply may cite, numbered as the prompt shows
    # conn (issue 28): template variables a preparer sets (a connection's agent's instructions)
    prompt_variables: dict[str, object] = field(default_factory=dict)
    # The parts its entry chose (an agent API call: its version's retrieval, prompt, model, checks); None:
    # the channels' parts. A planned turn runs where it was accepted, so the plan is never saved.
    plan: TurnPlan | None = None
    # Read with the turn lock (one round trip): the memory window compose starts from, and the persona's
    # conversation meta (what the RAG search adds to the query). None: not read, a stage reads its own.
    fetched: list[Message] | None = None
    conversation_meta: str | None = None
    prompt_read: list | None = None  # the prompt assembler's reads (``PromptAssembler.read_into``)
    # Writes a stage leaves for the turn's closing round trip (the RAG context stored as an attribute).
    closing: list[Callable[[Pipeline], None]] = field(default_factory=list)
    # A reply its channel decided without the model (a relay caller asking for a person when no one can take
    # the call): stored and delivered like any reply; None: the model answers.
    answer: str | None = None
    tools: TurnTools | None = None  # the agent's tools (issue 40), set by a context preparer
    call_options: CallOptions | None = None  # its agent's model and inference settings, set by a preparer
    tool_state: ToolState | None = None  # what its tool loop starts from, read with the turn lock
    # media (issue 44): images and documents the customer sent, held in this process for this turn only (a
    # turn resumed elsewhere after a crash answers without them: they are never stored)
    media: TurnMedia | None = None
    # What the customer is told on a handoff, when their channel words it otherwise (a relay caller's language);
    # None: ``SWITCHBOARD_HANDOFF_MESSAGE``
    handoff_message: str | None = None

    # What ``run`` works out again from the store when it starts; everything else is saved.
    RECOMPUTED = frozenset({"memory", "recent", "rag", "hits", "agentic", "kbs", "citations", "sources",
                            "prompt_variables", "plan", "fetched", "conversation_meta", "prompt_read",
                            "closing", "answer", "tools", "tool_state", "media", "handoff_message",
                            "call_options"})

    def snapshot(self) -> str:
        """The accepted turn as JSON, to run it in another process (after a crash)."""
        return TurnSnapshot.of(self).model_dump_json()

    @classmethod
    def restore(cls, raw: str | bytes) -> Turn:
        return TurnSnapshot.model_validate_json(raw).turn()


class TurnSnapshot(BaseModel):
    """What an accepted turn is before it runs: enough to run it in another process after a crash."""

    inbound: InboundMessage
    persona: Persona
    conversation: Conversation
    user_message: Message
    ticket: int
    started: bool
    trace: TurnTrace
    rag_mode: RagMode = "inline"

    @classmethod
    def of(cls, turn: Turn) -> TurnSnapshot:
        return cls(**{name: getattr(turn, name) for name in cls.model_fields})

    def turn(self) -> Turn:
        return Turn(**{name: getattr(self, name) for name in type(self).model_fields})


class ContextPreparer(Protocol):
    """Runs before the prompt is built (RAG context, live data); may fill ``turn.rag`` and the trace."""

    async def prepare(self, turn: Turn) -> None: ...


@dataclass
class TurnOutcome:
    """What a turn did. ``agent_message`` is None when nothing was sent: the conversation is handed off
    to a person (``turn.trace.suppressed`` says since when and by whom)."""

    turn: Turn
    reply: Reply
    agent_message: Message | None
    delivery: DeliveryReport
    sent_text: str | None = None  # the reply as handed to the channel (to send it again if it failed)

    @property
    def suppressed(self) -> bool:
        return self.agent_message is None


class _Stopwatch:
    def __init__(self, trace: TurnTrace, metrics: Metrics) -> None:
        self.trace, self.metrics = trace, metrics
        self.mark = time.perf_counter()
        self.cpu_mark = time.process_time()

    def lap(self, stage: str) -> None:
        now, cpu = time.perf_counter(), time.process_time()
        seconds = now - self.mark
        self.trace.stages.append(StageTiming(stage=stage, ms=round(seconds * 1000, 3),
                                             cpu_ms=round((cpu - self.cpu_mark) * 1000, 3)))
        self.mark, self.cpu_mark = now, cpu
        self.metrics.stage_seconds.labels(stage).observe(seconds)


# What an entry stores with an accepted turn (the web chat's resumable snapshot, the inbox's accepted
# turn), queued in the turn's opening round trip: called once, with the turn and its ticket.
OpeningWrites = Callable[[Pipeline, "Turn"], None]
_OPENING: ContextVar[OpeningWrites | None] = ContextVar("opening_writes", default=None)


@contextlib.contextmanager
def opening_writes(writes: OpeningWrites) -> Iterator[None]:
    """``accept`` calls inside this block (in this task) queue ``writes`` in their opening round trip:
    for an entry that reaches ``accept`` through a channel's code (the inbox)."""
    token = _OPENING.set(writes)
    try:
        yield
    finally:
        _OPENING.reset(token)


def _raise_first(answers: list) -> None:
    for answer in answers:
        if isinstance(answer, Exception):
            raise answer


def _add_redis(trace: TurnTrace, tally: RedisTally) -> None:
    trace.redis_round_trips += tally.round_trips
    trace.redis_cpu_ms = round(trace.redis_cpu_ms + tally.cpu_s * 1000, 3)


class TurnPipeline:
    def __init__(
        self,
        settings: Settings,
        store: RedisStore,
        sessions: Sessions,
        memory: Memory,
        lock: TurnLock,
        prompts: PromptAssembler,
        responder: Responder,
        events: EventBus,
        metrics: Metrics,
        preparers: Sequence[ContextPreparer] = (),
        handoffs: Handoffs | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.sessions = sessions
        self.memory = memory
        self.lock = lock
        self.prompts = prompts
        self.responder = responder
        self.events = events
        self.metrics = metrics
        self.preparers = list(preparers)
        self.handoffs = handoffs
        self.intents = ReplyIntents(store)
        self.slots = CpuSlots(settings.turn_cpu_slots)  # webhook acks in this process come first
        # What each installed channel can do (filled as channels are installed): only channels that can be
        # handed off to a person are ever silenced for one (a live phone call is not).
        self.capabilities: dict[str, Capabilities] = {}
        self._phrases = [p.strip().lower() for p in settings.handoff_phrases.split("|") if p.strip()]
        # What other services write when a turn ends, queued in its closing round trip (persona id given).
        self.closing_writes: list[Callable[[Pipeline, str], None]] = []
        # ... and what counts a finished turn (insight, issue 41: tokens, cost, outcomes), given the turn.
        self.turn_writes: list[Callable[[Pipeline, Turn], None]] = []
        self.tool_loop: ToolLoop | None = None  # the agent's tools (gateway.turn.tools), set by the services
        # Messages another service takes instead of a turn (the answer to a closing question, issue 41): True
        # when taken. Each must cost no round trip for a message that is plainly not its own.
        self.intercepts: list[Callable[[InboundMessage], Awaitable[bool]]] = []

    async def accept(self, inbound: InboundMessage, *, rag_mode: RagMode = "inline",
                     delivery_id: str | None = None, plan: TurnPlan | None = None,
                     opening: OpeningWrites | None = None) -> Turn | None:
        """Persist the user message and take a turn ticket; ``None`` for a duplicate delivery.

        ``delivery_id`` is the inbox entry the message came in: accepting it again (its first try was cut
        off by a Redis failure before the turn was recorded) is not a duplicate, and stores the user
        message under the same id, so the transcript holds it once. ``opening`` queues what the entry
        stores with the accepted turn (to resume it) in the turn's opening round trip (default: what
        ``opening_writes`` set for this task)."""
        opening = opening or _OPENING.get()
        for take in self.intercepts:
            if await take(inbound):
                return None
        async with self.slots.hold():
            with counting() as tally:
                turn = await self._accept(inbound, rag_mode, delivery_id, opening)
        if turn is not None:
            turn.plan = plan
            _add_redis(turn.trace, tally)
        return turn

    async def _accept(self, inbound: InboundMessage, rag_mode: RagMode, delivery_id: str | None,
                      opening: OpeningWrites | None) -> Turn | None:
        """Two round trips: the arrival (dedup claim, persona, active conversation, its turn ticket) and
        the opening writes (the conversation, the user message, what the entry adds with ``opening``). A
        new conversation takes its ticket in the opening writes, so the entry's own writes follow in one
        more; a new identity or a conversation that went idle cost a few more."""
        t0, cpu0 = time.perf_counter(), time.process_time()
        arrival = await self.store.arrive(inbound.channel, inbound.external_message_id, inbound.identity,
                                          inbound.thread, self.lock.ticket_key_parts(), owner=delivery_id)
        if arrival is None:
            self.metrics.duplicates.labels(inbound.channel).inc()
            return None
        ticket, ticket_of = arrival.ticket, arrival.ticket_of
        try:
            persona = arrival.persona
            if persona is None:
                persona = await self.store.resolve_persona(inbound.identity, inbound.display_name)
                active = await self.store.active_conversation(persona.id, inbound.channel, inbound.thread)
            else:
                active = arrival.conversation
            conversation, started = await self.sessions.resume(persona, inbound, active)
            if ticket is not None and ticket_of != conversation.id:  # it went idle: its ticket is not used
                await self.lock.pass_ticket(ticket_of, ticket)
                ticket = ticket_of = None
            if started:
                await self.sessions.announce_start(persona, conversation)
            user_message = Message(
                **_stable_id(inbound.channel, delivery_id),
                conversation_id=conversation.id,
                persona_id=persona.id,
                role=Role.USER,
                channel=inbound.channel,
                text=inbound.text,
                external_id=inbound.external_message_id,
                created_at=inbound.received_at,
                media=inbound.media,
            )
            trace = TurnTrace(
                conversation_id=conversation.id,
                persona_id=persona.id,
                channel=inbound.channel,
                user_message_id=user_message.id,
                connection=inbound.connection, agent=inbound.agent,  # conn (issue 28)
            )
            user_message.turn_id = trace.turn_id
            turn_model_calls.set(trace.model_calls)  # the turn's other model calls land in its trace (insight)
            turn = Turn(inbound, persona, conversation, user_message, ticket or 0, started, trace, rag_mode=rag_mode)
            pipe = self.store.redis.pipeline(transaction=False)
            self.sessions.save_into(pipe, conversation, started)
            self.store.add_message_into(pipe, user_message)
            at = len(pipe.command_stack)
            if ticket is None:
                self.lock.take_ticket_into(pipe, conversation.id)
            elif opening is not None:
                opening(pipe, turn)
                opening = None
            answers = await pipe.execute(raise_on_error=False)
            if ticket is None and not isinstance(answers[at], Exception):
                ticket = turn.ticket = int(answers[at])
                ticket_of = conversation.id
            _raise_first(answers)
            if opening is not None:  # a new conversation's ticket is known only now: the entry's writes follow
                pipe = self.store.redis.pipeline(transaction=False)
                opening(pipe, turn)
                await pipe.execute()
        except Exception:
            # Nothing was answered: let the vendor's retry (or the user's resend) try again, and let
            # the conversation's next turn go ahead instead of waiting for a ticket nobody will use.
            if ticket is not None and ticket_of is not None:
                await self.lock.pass_ticket(ticket_of, ticket)
            await self.store.release_claim("msg", inbound.channel, inbound.external_message_id)
            raise
        trace.stages.append(StageTiming(stage="accept", ms=round((time.perf_counter() - t0) * 1000, 3),
                                        cpu_ms=round((time.process_time() - cpu0) * 1000, 3)))
        return turn

    async def abandon(self, turn: Turn) -> None:
        """An accepted turn that will not run (what would resume it could not be recorded): the
        conversation's next turn need not wait for its ticket. With Redis away this fails too, and the
        ticket is skipped after the turn lock's grace instead."""
        try:
            await self.lock.pass_ticket(turn.conversation.id, turn.ticket)
        except Exception as exc:
            log.warning("could not give up the ticket of abandoned turn %s: %s", turn.trace.turn_id, exc)

    async def run(self, turn: Turn, sink: ReplySink, fence: Fence | None = None) -> TurnOutcome:
        with counting() as tally:
            return await self._run(turn, sink, fence, tally)

    async def _run(self, turn: Turn, sink: ReplySink, fence: Fence | None, tally: RedisTally) -> TurnOutcome:
        t0 = time.perf_counter()
        turn_context.set({"conversation_id": turn.conversation.id, "turn_id": turn.trace.turn_id})
        clock = _Stopwatch(turn.trace, self.metrics)
        conversation_id = turn.conversation.id

        def reads(pipe) -> None:
            # In the round trip that takes the lock (so they see what the turn before wrote): the tool loop's
            # journal and proposed action, who answers, a reply an earlier run recorded, the memory window
            # and the conversation meta.
            if self.tool_loop is not None:
                tool_reads[0] = self.tool_loop.read_into(pipe, turn.trace.turn_id, conversation_id)
            if self.handoffs is not None:
                self.handoffs.get_into(pipe, conversation_id)
            self.intents.earlier_into(pipe, turn.trace.turn_id)
            self.memory.read_into(pipe, turn.persona.id, self._memory_count, self._memory_since(turn))
            self.sessions.attributes.get_into(pipe, turn.persona.id, CONVERSATION_META.name)
            prompt_reads[0] = self._prompts(turn).read_into(pipe, turn.persona.id)

        prompt_reads, tool_reads = [0], [0]
        async with self.lock.hold(conversation_id, turn.ticket, self.settings.turn_lock_ttl_s, reads) as held:
            clock.lap("lock_wait")
            cut = len(held.reads) - prompt_reads[0]
            if self.tool_loop is not None:
                turn.tool_state = self.tool_loop.parse(held.reads[:tool_reads[0]])
            *state, raw_earlier, raw_memory, raw_meta = held.reads[tool_reads[0]:cut]
            turn.prompt_read = held.reads[cut:] if prompt_reads[0] else None
            turn.fetched = self.memory.parse(raw_memory)
            turn.conversation_meta = str(self.sessions.attributes.parse(CONVERSATION_META.name, raw_meta) or "")
            handoff = self._silenced(turn, Handoffs.parse(conversation_id, state[0]) if state else None)
            if handoff is not None:
                return await self._silent(turn, t0, handoff, held)
            wants_person = self._asks_for_person(turn)
            earlier = self.intents.parse(raw_earlier)
            if earlier is not None:  # resumed after a run that got as far as sending: that reply stands
                wants_person = False
                reply = Reply(text=earlier.text, responder="resumed")
            elif wants_person:
                turn.trace.handoff = "the user asked for a person"
                reply = Reply(text=turn.handoff_message or self.settings.handoff_message, responder="handoff")
            elif turn.answer is not None:
                reply = Reply(text=turn.answer, responder="channel")
            else:
                # One deadline for the whole turn: context (retrieval, the search LLM) may use half of it,
                # the reply (with its retries) what is left; past it the user gets the fallback message.
                now = asyncio.get_running_loop().time()
                deadline = now + self.settings.turn_deadline_s
                prompt = await self.compose(turn, clock, context_deadline=now + self.settings.turn_deadline_s / 2)
                if turn.media is not None:
                    prompt.messages = turn.media.attach(prompt.messages)
                turn.trace.prompt = prompt.messages
                turn.trace.sections = prompt.sections
                for note in prompt.notes:
                    _note(turn, note)
                clock.lap("prompt")
                reply = await self._reply(turn, prompt.messages, sink, deadline)
                clock.lap("llm")
                if turn.plan is not None:
                    reply = await turn.plan.finish(turn, prompt.messages, reply)
                    clock.lap("checks")
                reply = self._cite(turn, reply)
                reply, wants_person = self._model_handoff(turn, reply)
            holder = turn.trace.turn_id
            gate_held = self.handoffs is not None  # from the intent on, until the closing round trip lets it go
            try:
                try:
                    agent_message, delivery, sent_text = await self._send(turn, reply, sink, fence, earlier, holder)
                except HandedOff:
                    # Taken over while this turn ran: the operator answers this message, not the bot.
                    gate_held = False
                    turn.trace.reply = reply.text
                    why = await self._handed_off(turn) or "handed off while the turn ran"
                    return await self._silent(turn, t0, why, held)
                clock.lap("deliver")
                if wants_person and self.handoffs is not None:
                    await self.handoffs.request(turn.conversation.id, turn.trace.handoff or "a person was asked for")
                await self._finish(turn, held, reply, agent_message, delivery, t0, tally, holder)
                gate_held = False
            finally:
                if gate_held and self.handoffs is not None:
                    await self.handoffs.release_gate(turn.conversation.id, holder)
        self.metrics.turns.labels(turn.inbound.channel, reply.responder).inc()
        self.metrics.turn_seconds.labels(turn.inbound.channel).observe(time.perf_counter() - t0)
        await self.events.publish(
            TurnCompleted(turn.persona.id, turn.conversation.id, turn.trace.turn_id)
        )
        return TurnOutcome(turn=turn, reply=reply, agent_message=agent_message, delivery=delivery,
                           sent_text=sent_text)

    async def _finish(self, turn: Turn, held: HeldTurn, reply: Reply, agent_message: Message,
                      delivery: DeliveryReport, t0: float, tally: RedisTally, holder: str) -> None:
        """The turn's end in one round trip: the reply, the trace, the indexes and the live feed, then
        the handoff gate's release and the turn lock's."""
        trace = turn.trace
        trace.agent_message_id = agent_message.id
        trace.reply = reply.text
        trace.model = reply.model
        trace.responder = reply.responder
        trace.usage = reply.usage
        trace.tool_calls = reply.tool_calls or trace.tool_calls  # a fallback reply keeps the calls it made
        trace.delivery_error = delivery.error
        trace.delivery_retryable = not delivery.delivered and delivery.retryable
        trace.abandoned = delivery.left
        trace.total_ms = round((time.perf_counter() - t0) * 1000, 3)
        _add_redis(trace, tally)
        turn.conversation.last_activity_at = utcnow()
        then = self._closing(turn)
        if self.handoffs is not None:
            handoffs = self.handoffs
            then.append(lambda pipe: handoffs.release_gate_into(pipe, turn.conversation.id, holder))
        then.append(lambda pipe: self.lock.release_into(pipe, held))
        await held.stop_keeping()
        await self.store.finish_turn(agent_message, turn.conversation, trace, self.sessions.activity_key, then)
        held.released = True

    async def _send(self, turn: Turn, reply: Reply, sink: ReplySink, fence: Fence | None,
                    earlier: PlannedReply | None, holder: str) -> tuple[Message, DeliveryReport, str]:
        """Take the handoff gate and record the intent (one round trip; ``HandedOff`` when an operator
        has the conversation), then deliver the reply. A resumed turn whose reply may have gone out sends
        again only under its key. Nothing is awaited between the intent and the send: a process that dies
        in that window leaves a reply that a vendor without idempotency keys (Telegram, Slack) never
        received and that is not sent again, so the window is kept to the send."""
        capabilities = self.capabilities.get(turn.inbound.channel)
        style = capabilities.citations if capabilities is not None else "structured"
        planned = earlier or PlannedReply(new_id(), deliverable(reply.text, turn.sources, style, turn.citations))
        gate = None
        if self.handoffs is not None:
            state_key, gate_key = self.handoffs.gate_keys(turn.conversation.id)
            gate = Gate(state_key, gate_key, holder, self.handoffs.gate_ttl_ms)
        intent, planned = await self.intents.begin(turn.trace.turn_id, planned, fence, gate)
        agent_message = Message(
                id=planned.message_id,
                conversation_id=turn.conversation.id,
                persona_id=turn.persona.id,
                role=Role.AGENT,
                channel=turn.inbound.channel,
                text=reply.text,
                turn_id=turn.trace.turn_id,
                delivery=DeliveryStatus.PENDING,
                sources=turn.sources,
            )
        if reply.choices and callable(offer := getattr(sink, "offer", None)):
            offer(reply.choices)  # buttons where the channel has them (a proposed action's Yes / No)
        if intent is SendIntent.FIRST or isinstance(sink, IdempotentSink):
            delivery = await self._deliver(sink, planned.text, key=turn.trace.turn_id, message_id=planned.message_id)
            agent_message.delivery = (DeliveryStatus.INTERRUPTED if delivery.interrupted
                                      else DeliveryStatus.DELIVERED if delivery.delivered else DeliveryStatus.FAILED)
            agent_message.delivery_error = delivery.error
        else:
            why = "resumed after its process stopped while sending: not sent again (no idempotency key)"
            _note(turn, why)
            log.warning("turn %s on %s: %s; the user may not have the reply", turn.trace.turn_id,
                        turn.inbound.channel, why)
            delivery = DeliveryReport(delivered=True)  # done with, not retried; the transcript says so
            agent_message.delivery, agent_message.delivery_error = DeliveryStatus.UNCERTAIN, why
        return agent_message, delivery, planned.text  # stored in the turn's closing round trip

    def _cite(self, turn: Turn, reply: Reply) -> Reply:
        cited = cite(turn.citations, turn.sources, reply.text)
        floor = max(self.settings.sources_min_score, self.settings.relevance_threshold or 0.0)
        texts = {hit.source: hit.summary for hit in turn.hits}
        turn.trace.citations, reply.text = cited.trace, cited.text
        turn.sources = used_sources(cited.sources, texts, reply.text, floor)
        return reply

    async def _handed_off(self, turn: Turn) -> str | None:
        """Why the bot must not answer this conversation now, or None."""
        if self.handoffs is None or not self._can_hand_off(turn):
            return None
        return self._silenced(turn, await self.handoffs.get(turn.conversation.id))

    def _silenced(self, turn: Turn, handoff: Handoff | None) -> str | None:
        """Why the bot must not answer, given the conversation's handoff state (None: it answers)."""
        if handoff is None or not self._can_hand_off(turn):
            return None
        if handoff.status == "human":
            return f"handed off to {handoff.operator}: the operator answers, not the bot"
        return f"waiting for an operator ({handoff.reason or 'a person was asked for'}): the bot does not answer"

    def _can_hand_off(self, turn: Turn) -> bool:
        capabilities = self.capabilities.get(turn.inbound.channel)
        return capabilities is not None and capabilities.handoff

    def _asks_for_person(self, turn: Turn) -> bool:
        if self.handoffs is None or not self._can_hand_off(turn):
            return False
        text = " ".join(turn.inbound.text.lower().split())
        return any(phrase in text for phrase in self._phrases)

    def _model_handoff(self, turn: Turn, reply: Reply) -> tuple[Reply, bool]:
        """The model ends a reply with ``[HANDOFF]`` to ask for a person (the marker is never sent), or
        calls the built-in ``handoff`` tool (the reply is then the handoff message already)."""
        if reply.handoff is not None and self.handoffs is not None and self._can_hand_off(turn):
            turn.trace.handoff = reply.handoff
            if turn.handoff_message and reply.text == self.settings.handoff_message:
                reply.text = turn.handoff_message
            return reply, True
        if (not self.settings.handoff_llm_signal or HANDOFF_MARKER not in reply.text
                or self.handoffs is None or not self._can_hand_off(turn)):
            return reply, False
        text = reply.text.replace(HANDOFF_MARKER, "").strip() or turn.handoff_message or self.settings.handoff_message
        turn.trace.handoff = "the model asked for a person"
        return Reply(text=text, model=reply.model, usage=reply.usage, responder=reply.responder), True

    def _closing(self, turn: Turn) -> list[Callable[[Pipeline], None]]:
        persona_id = turn.persona.id
        return [*turn.closing, *(partial(write, persona_id=persona_id) for write in self.closing_writes),
                *(partial(write, turn=turn) for write in self.turn_writes)]

    async def _silent(self, turn: Turn, t0: float, why: str, held: HeldTurn) -> TurnOutcome:
        """Nothing is sent: the user's message is stored and shows live in the console. One round trip:
        the trace, the conversation's activity, the writes stages left, the turn lock's release."""
        trace = turn.trace
        trace.suppressed = why
        trace.responder = "handoff"
        trace.total_ms = round((time.perf_counter() - t0) * 1000, 3)
        turn.conversation.last_activity_at = utcnow()
        await held.stop_keeping()
        await self.store.finish_silent_turn(turn.conversation, trace, self.sessions.activity_key,
                                            [*self._closing(turn), lambda pipe: self.lock.release_into(pipe, held)])
        held.released = True
        self.metrics.turns.labels(turn.inbound.channel, "handoff").inc()
        await self.events.publish(TurnCompleted(turn.persona.id, turn.conversation.id, trace.turn_id))
        return TurnOutcome(turn=turn, reply=Reply(text="", responder="handoff"), agent_message=None,
                           delivery=DeliveryReport(delivered=False, error=why))

    async def compose(self, turn: Turn, clock: _Stopwatch | None = None, pending: Message | None = None,
                      context_deadline: float | None = None) -> AssembledPrompt:
        """Memory → context preparers → prompt: the part of a turn the prompt preview shares.

        ``pending`` is a user message that is not stored (a preview's sample text); context
        preparers that are still running at ``context_deadline`` (loop time) are cut off."""
        plan = turn.plan
        # One read serves the prompt and the RAG search (which wants a longer history).
        async with self.slots.hold():
            recent = await self.memory.get_memory(
                turn.persona, count=self._memory_count, max_chars=self.settings.memory_max_chars,
                since=self._memory_since(turn), fetched=turn.fetched,
            )
        turn.recent = self._memory_for(turn, recent)
        turn.memory = turn.recent[-self.settings.memory_count:]
        if pending is not None:
            turn.memory.append(pending)
        if clock is not None:
            clock.lap("memory")
        for preparer in plan.preparers if plan is not None else self.preparers:
            await self._prepare(preparer, turn, context_deadline)
        if clock is not None:
            clock.lap("context")
        async with self.slots.hold():
            assembled = await self._prompts(turn).build(
                PromptInputs(
                    persona_id=turn.persona.id,
                    channel=turn.inbound.channel,
                    memory=turn.memory,
                    rag=turn.rag,
                    variables=turn.prompt_variables,  # conn (issue 28)
                    read=turn.prompt_read,
                )
            )
        if turn.citations is not None and turn.citations.numbered and turn.sources:
            assembled.messages = with_instruction(assembled.messages)
        return assembled

    def _prompts(self, turn: Turn) -> PromptAssembler:
        return turn.plan.prompts if turn.plan is not None else self.prompts

    @property
    def _memory_count(self) -> int:
        return max(self.settings.memory_count, RECENT_FOR_CONTEXT)

    @staticmethod
    def _memory_since(turn: Turn) -> datetime | None:
        return turn.plan.memory_since if turn.plan is not None else None

    async def preview(self, persona: Persona, text: str, channel: str = "preview"):
        """The prompt a turn would send for ``text`` now (the same path as ``run``); nothing is stored."""
        inbound = InboundMessage(
            channel=channel, external_user_id=persona.id, external_message_id="preview",
            identity=f"preview:{persona.id}", text=text,
        )
        conversation = Conversation(persona_id=persona.id, channel=channel)
        user_message = Message(
            conversation_id=conversation.id, persona_id=persona.id, role=Role.USER, channel=channel, text=text
        )
        trace = TurnTrace(
            conversation_id=conversation.id, persona_id=persona.id, channel=channel,
            user_message_id=user_message.id,
        )
        turn = Turn(inbound, persona, conversation, user_message, ticket=0, started=False, trace=trace)
        return await self.compose(turn, pending=user_message)

    async def expect(self, identity: str, display_name: str | None = None) -> None:
        """Someone is about to speak (a phone call was answered): resolve their persona now, so their first
        message's arrival finds it in its one round trip instead of creating it on the turn's path."""
        await self.store.resolve_persona(identity, display_name)

    async def handle(self, inbound: InboundMessage, sink: ReplySink) -> TurnOutcome | None:
        turn = await self.accept(inbound)
        return None if turn is None else await self.run(turn, sink)

    @staticmethod
    def _memory_for(turn: Turn, memory: list[Message]) -> list[Message]:
        """User messages that arrived after this one are waiting for their own turns: not yet said."""
        own = turn.user_message
        return [
            m for m in memory
            if not (m.role is Role.USER and m.id != own.id and m.created_at > own.created_at)
        ]

    async def _prepare(self, preparer: ContextPreparer, turn: Turn, deadline: float | None) -> None:
        try:
            async with asyncio.timeout_at(deadline):
                await preparer.prepare(turn)
        except TimeoutError:  # context is an enrichment: the turn goes on without it
            log.warning("context preparer %s cut off at half the turn deadline", type(preparer).__name__)
            _note(turn, f"{type(preparer).__name__}: cut off after {self.settings.turn_deadline_s / 2:g} s "
                        "(half of SWITCHBOARD_TURN_DEADLINE_S); answered without it")
        except Exception as exc:  # context is an enrichment: the turn goes on without it
            log.exception("context preparer %s failed", type(preparer).__name__)
            _note(turn, f"{type(preparer).__name__}: {type(exc).__name__}: {exc}")

    async def _reply(self, turn: Turn, prompt, sink: ReplySink, deadline: float) -> Reply:
        """The responder's reply, or the fallback message once, with the reason in the trace."""
        plan = turn.plan
        streams = sink.streaming and not (plan is not None and plan.holds_stream)
        request = ReplyRequest(
            prompt=prompt, hits=turn.hits, on_delta=sink.delta if streams else None, agentic=turn.agentic,
            kbs=turn.kbs or None, on_tool=getattr(sink, "tool_event", None), options=turn.call_options,
        )
        responder = plan.responder if plan is not None else self.responder
        if self.tool_loop is not None:
            responder = self.tool_loop.around(responder, turn.tools, turn.trace, deadline, turn.tool_state,
                                              can_hand_off=self.handoffs is not None and self._can_hand_off(turn))
        try:
            async with asyncio.timeout_at(deadline):
                interrupted = getattr(sink, "interrupted", None)
                if interrupted is None:
                    return await responder.reply(request)
                return await self._interruptible(responder, request, interrupted, sink)
        except LLMError as exc:
            if plan is not None and plan.raises_llm_errors:
                _note(turn, exc.message)
                raise
            kind, problem = type(exc.__cause__ or exc).__name__, exc.message
        except TimeoutError:
            kind = "TurnDeadline"
            problem = f"no reply within the turn deadline ({self.settings.turn_deadline_s:g} s)"
        except Exception as exc:  # a reply is owed whatever broke: never a 500, never an empty reply
            log.exception("responder failed for turn %s", turn.trace.turn_id)
            kind, problem = type(exc).__name__, f"responder failed: {type(exc).__name__}: {exc}"
        self.metrics.llm_errors.labels(kind).inc()
        log.warning("LLM failed for turn %s: %s", turn.trace.turn_id, problem)
        _note(turn, problem)
        return Reply(text=self.settings.llm_fallback_message, responder="fallback")

    async def _interruptible(self, responder: Responder, request: ReplyRequest, interrupted: asyncio.Event,
                             sink) -> Reply:
        """A reply the listener can cut off (a caller barging in): the model's stream is cancelled at once
        and the reply is what was heard (``sink.heard``), so memory matches the call."""
        replying = asyncio.ensure_future(responder.reply(request))
        waiting = asyncio.ensure_future(interrupted.wait())
        try:
            await asyncio.wait({replying, waiting}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
        if replying.done():
            return replying.result()
        replying.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await replying
        return Reply(text=sink.heard, responder="interrupted")

    async def _deliver(self, sink: ReplySink, text: str, key: str, message_id: str) -> DeliveryReport:
        try:
            if isinstance(sink, IdempotentSink):
                report = await sink.deliver_keyed(text, key)
            elif isinstance(sink, RatedSink):
                report = await sink.deliver_rated(text, message_id)
            else:
                report = await sink.deliver(text)
        except Exception as exc:
            log.exception("delivery failed")
            report = DeliveryReport(delivered=False, error=f"{type(exc).__name__}: {exc}")
        if not report.delivered:
            self.metrics.delivery_failures.labels(getattr(sink, "channel", "unknown")).inc()
        return report


def _note(turn: Turn, problem: str) -> None:
    turn.trace.error = f"{turn.trace.error}; {problem}" if turn.trace.error else problem

"""PrepareRagContext: pick knowledge-base topics for the conversation and store them as ``rag``.

Runs before every reply (and, for voice, when a call starts with earlier history): chat
channels run it inline; voice runs it as an RQ job on the ``rag`` queue and the reply waits at
most ``SWITCHBOARD_RAG_VOICE_WAIT_MS`` for it, otherwise going on with the ``rag`` value already
stored (the documented window where the context reflects the previous turn).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rq import Queue, Retry
from rq.job import Job, JobStatus

from gateway.conversation.attributes import PersonaAttributes
from gateway.conversation.memory import Memory
from gateway.core.events import ConversationStarted
from gateway.core.models import CandidateTrace, Message, RetrievalTrace, Role
from gateway.core.settings import Settings
from gateway.jobs.registry import run_job
from gateway.knowledge.kb_tool import POLICY, ToolSupport
from gateway.turn.llm import UsageRecorder, model_calls_recorded
from gateway.turn.pipeline import Turn
from gateway.turn.ports import RagMode
from gateway.turn.responders import KnowledgeHit
from rag_core.errors import KnowledgeBaseUnavailable
from rag_core.rag_context import format_rag
from rag_core.retrieval import ChatTurn, SearchResult

log = logging.getLogger(__name__)

PREPARE_RAG_JOB = "prepare_rag_context"  # the job that runs ``PrepareRagContext.prepare_job``
RAG_HISTORY_MESSAGES = 20  # the seed's get_memory(count=20) for the search prompt
_DONE = {JobStatus.FINISHED, JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED}


def retrieval_trace(result: SearchResult) -> RetrievalTrace:
    return RetrievalTrace(
        strategy=result.strategy,
        candidates=[CandidateTrace(source=c.source, score=c.score or 0.0) for c in result.candidates],
        selected=[hit.topic.source for hit in result.hits],
        scores={hit.topic.source: round(hit.score, 4) for hit in result.hits},
        legs={hit.topic.source: hit.legs for hit in result.hits if hit.legs},
        fallback=result.fallback_reason if result.fell_back else None,
        timings_ms=result.timings_ms,
        cache=result.cache,
        notes=result.notes,
        left_out=result.left_out,
    )


def knowledge_hits(result: SearchResult) -> list[KnowledgeHit]:
    return [
        KnowledgeHit(
            source=h.topic.source, title=h.topic.title, summary=h.topic.summary, facts=tuple(h.topic.facts),
            score=h.score,
        )
        for h in result.hits
    ]


@dataclass(frozen=True)
class RetrievalChoice:
    """How the channels' agent retrieves now (from its agent definition; settings until one exists)."""

    mode: str = "inline"  # inline | agentic
    k: int | None = None
    kbs: tuple[str, ...] = ()  # empty: the settings' knowledge bases (all, unless configured)
    controls: Mapping[str, Any] = field(default_factory=dict)  # retrieval controls over the settings'


ChoiceSource = Callable[[str | None], Awaitable[RetrievalChoice | None]]  # the agent (None: the channels')


class PrepareRagContext:
    def __init__(
        self,
        settings: Settings,
        knowledge,  # gateway.knowledge.search.Knowledge
        attributes: PersonaAttributes,
        memory: Memory,
        queue: Queue,
        rag_modes: Mapping[str, RagMode] | None = None,
        tool_support: ToolSupport | None = None,
        choice: ChoiceSource | None = None,
    ) -> None:
        self.settings = settings
        # Each channel's rag mode, by name, as the channels registered them (read when a conversation starts).
        self.rag_modes = rag_modes if rag_modes is not None else {}
        self.knowledge = knowledge
        self.attributes = attributes
        self.memory = memory
        self.queue = queue
        self.tool_support = tool_support  # agentic retrieval needs a model that can call tools
        self.choice = choice  # the channels' agent definition, read (cached) before each turn
        self.record_usage: UsageRecorder | None = None  # the job's model calls, counted (set by the services)

    # -- the algorithm -------------------------------------------------------------------------
    async def prepare_for(
        self,
        persona_id: str,
        query: str,
        exclude_message_id: str | None = None,
        recent: list[Message] | None = None,
        choice: RetrievalChoice | None = None,
        *,
        meta: str | None = None,
        closing: list[Callable[[Any], None]] | None = None,
    ) -> SearchResult:
        """Search with the conversation around ``query`` and store the result as the ``rag`` attribute.
        ``meta`` is the persona's conversation meta when already read; with ``closing`` (a turn's closing
        round trip) the attribute is written there instead of now."""
        if recent is None:
            recent = await self.memory.get_memory(persona_id, count=RAG_HISTORY_MESSAGES + 1)
        history = _history(recent, exclude_message_id)
        if meta is None:
            meta = str(await self.attributes.get(persona_id, "conversation_meta") or "")
        choice = choice or await self._choice()
        result = await self.knowledge.search(query, history, conversation_meta=meta, k=choice.k,
                                             kbs=list(choice.kbs) or None, controls=dict(choice.controls))
        context = format_rag(result.topics)
        if closing is None:
            await self.attributes.set(persona_id, "rag", context)
        else:
            closing.append(lambda pipe: self.attributes.set_into(pipe, persona_id, "rag", context))
        return result

    # -- the pipeline hook ---------------------------------------------------------------------
    async def _choice(self, agent: str | None = None) -> RetrievalChoice:
        chosen = await self.choice(agent) if self.choice is not None else None
        return chosen or RetrievalChoice(mode=self.settings.retrieval_mode)

    async def prepare(self, turn: Turn) -> None:
        choice = await self._choice(turn.inbound.agent)  # conn (issue 28): a connection's own agent
        turn.kbs = list(choice.kbs)
        if self._agentic(turn, choice):
            turn.agentic = True
            turn.rag = POLICY  # where the knowledge would go, the prompt says how to search for it
            turn.trace.retrieval = RetrievalTrace(
                strategy="agentic", skipped="agentic retrieval: the model searches with query_knowledge itself")
            return
        if turn.rag_mode == "queued":
            await self._queued(turn)
            return
        try:
            result = await self.prepare_for(
                turn.persona.id, turn.inbound.text, turn.user_message.id, turn.recent or None, choice,
                meta=turn.conversation_meta, closing=turn.closing,
            )
        except KnowledgeBaseUnavailable as exc:
            log.warning("knowledge base unavailable; replying without RAG: %s", exc)
            turn.trace.retrieval = RetrievalTrace(skipped=f"knowledge base unavailable: {exc}")
            return
        turn.rag = format_rag(result.topics)
        turn.hits = knowledge_hits(result)
        turn.trace.retrieval = retrieval_trace(result)

    def _agentic(self, turn: Turn, choice: RetrievalChoice) -> bool:
        """Agentic for chat turns whose model can call tools; a phone call keeps queued inline retrieval
        (a tool round trip would be a second of silence)."""
        return (choice.mode == "agentic" and turn.rag_mode == "inline"
                and self.tool_support is not None and self.tool_support.supported)

    async def _queued(self, turn: Turn) -> None:
        t0 = time.perf_counter()
        trace = turn.trace
        job = await asyncio.to_thread(self.enqueue, turn.persona.id, turn.inbound.text, turn.user_message.id,
                                      (trace.agent, trace.channel, trace.connection))
        deadline = t0 + self.settings.rag_voice_wait_ms / 1000
        status = None
        while time.perf_counter() < deadline:
            status = await asyncio.to_thread(job.get_status, refresh=True)
            if status in _DONE:
                break
            await asyncio.sleep(0.02)
        waited_ms = round((time.perf_counter() - t0) * 1000, 1)
        turn.rag = str(await self.attributes.get(turn.persona.id, "rag") or "")
        if status == JobStatus.FINISHED:
            turn.trace.retrieval = RetrievalTrace.model_validate(await asyncio.to_thread(job.return_value))
            turn.trace.retrieval.timings_ms["voice_wait"] = waited_ms
        else:
            turn.trace.retrieval = RetrievalTrace(
                strategy="queued",
                skipped=f"rag job {job.id} {status or 'pending'} after {waited_ms} ms; used the stored context",
                timings_ms={"voice_wait": waited_ms},
            )

    async def prepare_job(self, persona_id: str, query: str, exclude_message_id: str | None,
                          agent: str | None = None, channel: str | None = None, connection: str | None = None) -> dict:
        """The ``prepare_rag_context`` job: search in the process that owns the knowledge base. Its model calls
        are counted at the (agent, channel, connection) of the turn or call it was queued for."""
        with model_calls_recorded() as calls:
            result = await self.prepare_for(persona_id, query, exclude_message_id)
        if calls and self.record_usage is not None:
            await self.record_usage(agent, channel, connection, calls)
        return retrieval_trace(result).model_dump(mode="json")

    def enqueue(self, persona_id: str, query: str, exclude_message_id: str | None = None,
                where: tuple[str | None, str | None, str | None] = (None, None, None)) -> Job:
        """Queue the job; ``where``: the (agent, channel, connection) its model calls are counted at."""
        return self.queue.enqueue(
            run_job,
            self.settings.agent_id,
            PREPARE_RAG_JOB,
            persona_id,
            query,
            exclude_message_id,
            *where,
            retry=Retry(max=2, interval=[1, 5]),
            job_timeout=60,
            result_ttl=300,
            failure_ttl=24 * 3600,
        )

    # -- conversation start --------------------------------------------------------------------
    async def on_conversation_started(self, event: ConversationStarted) -> None:
        """A call that starts with earlier history (SMS, chat) gets its context before it speaks."""
        if self.rag_modes.get(event.conversation.channel) != "queued":
            return
        recent = await self.memory.get_memory(event.persona, count=RAG_HISTORY_MESSAGES)
        last_user = next((m for m in reversed(recent) if m.role is Role.USER), None)
        if last_user is not None:
            conversation = event.conversation
            await asyncio.to_thread(self.enqueue, event.persona.id, last_user.text, last_user.id,
                                    (None, conversation.channel, conversation.connection))


def _history(messages: list[Message], exclude_message_id: str | None) -> list[ChatTurn]:
    turns = [
        ChatTurn(role="user" if m.role is Role.USER else "agent", text=m.text)
        for m in messages
        if m.id != exclude_message_id and m.role in (Role.USER, Role.AGENT, Role.OPERATOR)
    ]
    return turns[-RAG_HISTORY_MESSAGES:]

"""Conversation meta (the seed's ``conversation_meta``): after each turn a queued job asks the LLM,
through ``structured_generation``, what is now known about the user and the conversation, and stores
it on the persona — it feeds the prompt's ``<ConversationMeta>`` and the RAG search prompt.
Without a language model nothing is extracted (and nothing is made up).

A turn only marks its persona due (one ``ZADD NX`` on a due-set, so a burst of turns costs one
extraction); the ``conversation_meta`` timer sweeps the due-set every ``conversation_meta_sweep_s``
and queues one job per persona whose delay has passed."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from rq import Queue

from gateway.conversation.attributes import CONVERSATION_META, PersonaAttributes
from gateway.conversation.memory import Memory, format_history
from gateway.core.clock import Clock
from gateway.core.events import TurnCompleted
from gateway.jobs.registry import run_job
from gateway.live.template_store import TemplateStore
from gateway.live.timers import Timer, periodic_timer
from gateway.turn.llm import LLMClient, UsageRecorder, model_calls_recorded

log = logging.getLogger(__name__)

TIMER = "conversation_meta"
EXTRACT_META_JOB = "extract_meta"  # the job that runs ``ConversationMeta.extract``
SWEEP_BATCH = 200  # personas queued per sweep; the rest wait for the next one

STAGES = ["new", "exploring", "deciding", "booking", "support", "closed"]
_NULLABLE_STR = {"type": ["string", "null"]}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "contact", "intent", "stage", "preferences", "summary"],
    "properties": {
        "name": _NULLABLE_STR,
        "contact": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "required": ["email", "phone"],
            "properties": {"email": _NULLABLE_STR, "phone": _NULLABLE_STR},
        },
        "intent": _NULLABLE_STR,
        "stage": {"type": "string", "enum": STAGES},
        "preferences": {"type": "array", "items": {"type": "string"}},
        "summary": {"type": "string"},
    },
}


def format_meta(meta: dict[str, Any]) -> str:
    """The stored form: one ``field: value`` line per known fact."""
    contact = meta.get("contact") or {}
    lines = [
        ("name", meta.get("name")),
        ("email", contact.get("email")),
        ("phone", contact.get("phone")),
        ("intent", meta.get("intent")),
        ("stage", meta.get("stage")),
        ("preferences", "; ".join(meta.get("preferences") or []) or None),
        ("summary", meta.get("summary")),
    ]
    return "\n".join(f"{k}: {str(v).strip()}" for k, v in lines if v not in (None, ""))


class ConversationMeta:
    def __init__(
        self,
        attributes: PersonaAttributes,
        memory: Memory,
        llm: LLMClient | None,
        templates: TemplateStore,
        queue: Queue,
        agent_id: str,
        clock: Clock,
        messages: int = 20,
        delay_s: int = 0,
    ) -> None:
        self.attributes = attributes
        self.memory = memory
        self.llm = llm
        self.templates = templates
        self.queue = queue
        self.agent_id = agent_id
        self.clock = clock
        self.messages = messages
        self.delay_s = delay_s
        self.due_key = attributes.store.key("meta", "due")
        self.record_usage: UsageRecorder | None = None  # the extraction's model call, counted (set by the services)

    @property
    def marks_due(self) -> bool:
        """Whether a finished turn only marks its persona due (``due_into``, in the turn's closing round
        trip), rather than queueing an extraction at once (``on_turn_completed``)."""
        return self.llm is not None and self.delay_s > 0

    def due_into(self, pipe, persona_id: str) -> None:
        """Queue ``on_turn_completed``'s one command in ``pipe`` (a turn's closing round trip)."""
        pipe.zadd(self.due_key, {persona_id: self.clock.now().timestamp() + self.delay_s}, nx=True)

    async def on_turn_completed(self, event: TurnCompleted) -> None:
        """At most one extraction per persona per ``delay_s``: a burst of turns costs one, and it
        does not compete with the next reply for the language model. One Redis command per turn."""
        if self.llm is None:
            return
        if self.delay_s <= 0:
            await asyncio.to_thread(self._enqueue, event.persona_id)
            return
        due = self.clock.now().timestamp() + self.delay_s
        await self.attributes.store.redis.zadd(self.due_key, {event.persona_id: due}, nx=True)

    async def sweep(self) -> int:
        """Queue an extraction for every persona whose delay has passed; returns how many. Each
        persona is taken off the due-set first (``ZREM`` answers 1 to one sweeper only), so a turn
        arriving during its extraction marks it due again."""
        redis = self.attributes.store.redis
        at = self.clock.now().timestamp()
        queued = 0
        for raw in await redis.zrangebyscore(self.due_key, "-inf", at, start=0, num=SWEEP_BATCH):
            if await redis.zrem(self.due_key, raw):
                await asyncio.to_thread(self._enqueue, raw.decode())
                queued += 1
        return queued

    def sweep_timer(self, period_s: int) -> Timer:
        async def sweep() -> None:
            if queued := await self.sweep():
                log.info("queued %d conversation meta extraction(s)", queued)

        return periodic_timer(TIMER, "sweep", period_s, sweep)

    def _enqueue(self, persona_id: str) -> None:
        self.queue.enqueue(run_job, self.agent_id, EXTRACT_META_JOB, persona_id, result_ttl=300,
                           failure_ttl=24 * 3600)

    async def extract(self, persona_id: str) -> str | None:
        """Update and store the persona's ``conversation_meta``; ``None`` when skipped (no LLM)."""
        if self.llm is None:
            return None
        history = await self.memory.get_memory(persona_id, count=self.messages)
        current = await self.attributes.get(persona_id, CONVERSATION_META.name)
        prompt = await self.templates.render(
            "conversation_meta", current_meta=current, history=format_history(history)
        )
        with model_calls_recorded() as calls:
            meta = await self.llm.structured_generation(prompt, SCHEMA)
        if calls and self.record_usage is not None:  # a job's call: counted with no agent or channel
            await self.record_usage(None, None, None, calls)
        text = format_meta(meta)
        await self.attributes.set(persona_id, CONVERSATION_META.name, text)
        return text

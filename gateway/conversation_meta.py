"""Conversation meta (the seed's ``conversation_meta``): after each turn a queued job asks the LLM,
through ``structured_generation``, what is now known about the user and the conversation, and stores
it on the persona — it feeds the prompt's ``<ConversationMeta>`` and the RAG search prompt.
Without a language model nothing is extracted (and nothing is made up)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from rq import Queue

from gateway.attributes import CONVERSATION_META, PersonaAttributes
from gateway.events import TurnCompleted
from gateway.live_jobs import extract_meta_job
from gateway.llm import LLMClient
from gateway.memory import Memory, format_history
from gateway.template_store import TemplateStore

log = logging.getLogger(__name__)

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
        messages: int = 20,
        delay_s: int = 0,
    ) -> None:
        self.attributes = attributes
        self.memory = memory
        self.llm = llm
        self.templates = templates
        self.queue = queue
        self.agent_id = agent_id
        self.messages = messages
        self.delay_s = delay_s

    async def on_turn_completed(self, event: TurnCompleted) -> None:
        """At most one extraction per persona per ``delay_s``: a burst of turns costs one, and it
        does not compete with the next reply for the language model. The hot path is one Redis
        command; an RQ job is scheduled only when none is pending."""
        if self.llm is None:
            return
        store = self.attributes.store
        key = store.key("meta", "pending", event.persona_id)
        if await store.redis.set(key, "1", nx=True, ex=self.delay_s + 3600):
            due = datetime.now(UTC) + timedelta(seconds=self.delay_s)
            await asyncio.to_thread(self._schedule, event.persona_id, due)

    def _schedule(self, persona_id: str, at: datetime) -> None:
        job = self.queue.create_job(
            extract_meta_job, args=(self.agent_id, persona_id),
            result_ttl=300, failure_ttl=24 * 3600, ttl=self.delay_s + 3600,
        )
        if at > datetime.now(UTC):
            self.queue.schedule_job(job, at)
        else:
            self.queue.enqueue_job(job)

    async def run_due(self, persona_id: str) -> str | None:
        """The job. The marker goes first, so a turn arriving during extraction schedules the next."""
        store = self.attributes.store
        await store.redis.delete(store.key("meta", "pending", persona_id))
        return await self.extract(persona_id)

    async def extract(self, persona_id: str) -> str | None:
        """Update and store the persona's ``conversation_meta``; ``None`` when skipped (no LLM)."""
        if self.llm is None:
            return None
        history = await self.memory.get_memory(persona_id, count=self.messages)
        current = await self.attributes.get(persona_id, CONVERSATION_META.name)
        prompt = await self.templates.render(
            "conversation_meta", current_meta=current, history=format_history(history)
        )
        meta = await self.llm.structured_generation(prompt, SCHEMA)
        text = format_meta(meta)
        await self.attributes.set(persona_id, CONVERSATION_META.name, text)
        return text

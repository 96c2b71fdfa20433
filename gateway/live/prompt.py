"""Prompt assembly: the operator's ``system`` template filled with named, size-budgeted sections,
the RAG placeholder, then cross-channel memory as chat messages.

Sections (in the default template's order): ``instructions`` (business instructions),
``conversation_meta`` and ``custom_sections`` (inside ``<ConversationMeta>``), ``calendar``
(``<ConvoAgentCalendar>``), ``injected_data`` (data injection + feeds), ``rag``
(``<AdditionalInformation>``), and ``memory``. Each is cut to its token budget at a boundary with a
marker; ``AssembledPrompt.sections`` reports every section's size and what was cut.

The ``system`` template renders within its budget (``SWITCHBOARD_TEMPLATE_RENDER_TIMEOUT_S``,
``SWITCHBOARD_TEMPLATE_MAX_OUTPUT_CHARS``); a live template that fails or goes over it is replaced
for this turn by the packaged default, and the ``system`` section of the report says so and why.
"""

from __future__ import annotations

import logging
from datetime import datetime
from zoneinfo import ZoneInfo

from gateway.conversation.attributes import (
    CONVERSATION_META,
    CUSTOM_PROMPT_SECTION,
    AttributeSpec,
    CustomerAttributes,
    PersonaAttributes,
)
from gateway.core.clock import Clock, describe_age
from gateway.core.models import Message, PromptMessage, Role
from gateway.live.budget import Sized, fit
from gateway.live.calendar import TIMEZONE, CalendarService, day_label
from gateway.live.data_injection import DataInjection
from gateway.live.feeds import FeedEntry, Feeds
from gateway.live.template_render import RenderBudget
from gateway.live.template_store import TemplateRenderFailed, TemplateStore
from gateway.turn.ports import AssembledPrompt, PromptInputs
from rag_core.rag_context import replace_rag_placeholder
from rag_core.tokens import estimate_tokens

log = logging.getLogger(__name__)

_CHAT_ROLES = {Role.USER: "user", Role.AGENT: "assistant", Role.OPERATOR: "assistant"}

DEFAULT_BUDGETS: dict[str, int] = {
    "instructions": 1500,
    "conversation_meta": 600,
    "custom_sections": 1000,
    "calendar": 1000,
    "injected_data": 2000,
    "rag": 2500,
    "memory": 4000,
}

AGENT_NAME = AttributeSpec("project_attributes_setting_agent_name", str, "Switchboard", "the agent's name")
BUSINESS_NAME = AttributeSpec("project_attributes_setting_business_name", str, "", "the business's name")
BUSINESS_INSTRUCTIONS = AttributeSpec("project_attributes_setting_business_instructions", str, "",
                  "instructions for the agent, placed at the top of the system prompt")


def render_feed(entry: FeedEntry, now: datetime) -> str:
    return f'<{entry.feed} updated="{describe_age(entry.received_at, now)}">\n{entry.text}\n</{entry.feed}>'


def fit_memory(memory: list[Message], max_tokens: int) -> tuple[list[Message], Sized]:
    """The newest messages that fit ``max_tokens`` (the latest one always); whole messages are dropped."""
    kept: list[Message] = []
    used = 0
    for message in reversed(memory):
        cost = estimate_tokens(message.text)
        if kept and used + cost > max_tokens:
            break
        kept.append(message)
        used += cost
    kept.reverse()
    dropped = memory[: len(memory) - len(kept)]
    size = Sized(
        text="", tokens=used, truncated=bool(dropped), cut_chars=sum(len(m.text) for m in dropped)
    )
    return kept, size


class PromptBuilder:
    """Given its parts (the sources it reads, the templates it renders with), not all of live context."""

    def __init__(
        self,
        templates: TemplateStore,
        calendar: CalendarService,
        data_injection: DataInjection,
        feeds: Feeds,
        clock: Clock,
        persona_attributes: PersonaAttributes,
        customer_attributes: CustomerAttributes,
        budgets: dict[str, int] | None = None,
        render_budget: RenderBudget | None = None,
    ) -> None:
        self.templates = templates
        self.calendar = calendar
        self.data_injection = data_injection
        self.feeds = feeds
        self.clock = clock
        self.persona_attributes = persona_attributes
        self.customer_attributes = customer_attributes
        self.budgets = {**DEFAULT_BUDGETS, **(budgets or {})}
        self.render_budget = render_budget or RenderBudget()

    def read_into(self, pipe, persona_id: str) -> int:
        """Every hash the prompt reads and the live system template (the calendar and the injected data
        live in the customer attributes: read once, not once each); see ``PromptAssembler``."""
        feed_keys = self.feeds.keys(persona_id)
        pipe.hgetall(self.persona_attributes.key(persona_id))
        pipe.hgetall(self.customer_attributes.key)
        for key in feed_keys:
            pipe.hgetall(key)
        self.templates.read_into(pipe, "system")
        return 3 + len(feed_keys)

    async def sections(self, inputs: PromptInputs) -> dict[str, str]:
        """The raw content of every text section, before budgets."""
        return (await self._read(inputs))[0]

    async def _read(self, inputs: PromptInputs) -> tuple[dict[str, str], dict, bytes | None]:
        # One round trip (``read_into``), or none when the turn read it with its lock.
        feed_keys = self.feeds.keys(inputs.persona_id)
        answers = inputs.read
        if answers is None:
            pipe = self.persona_attributes.store.redis.pipeline(transaction=False)
            self.read_into(pipe, inputs.persona_id)
            answers = await pipe.execute()
        raw_persona, raw_customer, *raw_feeds, system_template = answers
        persona = self.persona_attributes.values(raw_persona)
        customer = self.customer_attributes.values(raw_customer)
        calendar = await self.calendar.current(customer)
        injection = await self.data_injection.section(customer)
        feeds = await self.feeds.unexpired(feed_keys, raw_feeds)
        now = self.clock.now()
        injected = [injection, *(render_feed(e, now) for e in feeds)]
        raw = {
            "instructions": customer[BUSINESS_INSTRUCTIONS.name].strip(),
            "conversation_meta": persona[CONVERSATION_META.name].strip(),
            "custom_sections": persona[CUSTOM_PROMPT_SECTION.name].strip(),
            "calendar": calendar,
            "injected_data": "\n\n".join(part for part in injected if part),
            "rag": inputs.rag.strip(),
        }
        return raw, customer, system_template

    async def build(self, inputs: PromptInputs) -> AssembledPrompt:
        raw, customer, system_template = await self._read(inputs)
        sized = {name: fit(text, self.budgets[name]) for name, text in raw.items()}
        zone = ZoneInfo(customer[TIMEZONE.name])
        local = self.clock.now().astimezone(zone)
        variables: dict[str, object] = {
            "agent_name": customer[AGENT_NAME.name],
            "business_name": customer[BUSINESS_NAME.name],
            "business_instructions": sized["instructions"].text,
            "channel": inputs.channel,
            "conversation_meta": sized["conversation_meta"].text,
            "custom_sections": sized["custom_sections"].text,
            "calendar": sized["calendar"].text,
            "injected_data": sized["injected_data"].text,
            "now": f"{day_label(local.date())}, {local:%H:%M}",
            "timezone": zone.key,
            "persona_id": inputs.persona_id,
            "caller_language": "",  # a phone call's detected language (``channels.twilio.caller_language``)
            **inputs.variables,
        }
        why: dict[str, int | bool] = {"default_template": False}
        notes: list[str] = []
        try:
            system = await self.templates.render("system", budget=self.render_budget, stored=system_template,
                                                 **variables)
        except TemplateRenderFailed as exc:
            # A live template that passed its checks can still fail on real data, or a version saved
            # before the budget existed can go over it: answer anyway, with the packaged default.
            log.error("system template failed, using the packaged default: %s", exc.message)
            system = self.templates.render_default("system", **variables)
            why = {"default_template": True,
                   f"template_over_{exc.limit}_budget" if exc.limit else "template_error": True}
            notes.append(f"system template not used (the packaged default answered): {exc.message}")
        system = replace_rag_placeholder(system, sized["rag"].text).strip() + "\n"
        memory, memory_size = fit_memory(inputs.memory, self.budgets["memory"])
        messages = [PromptMessage(role="system", content=system)]
        messages += [
            PromptMessage(role=_CHAT_ROLES[m.role], content=m.text) for m in memory if m.role in _CHAT_ROLES
        ]
        report = {name: size.report() for name, size in sized.items()}
        report["memory"] = {**memory_size.report(), "chars": sum(len(m.text) for m in memory),
                            "messages": len(memory)}
        report["system"] = {"chars": len(system), "tokens": estimate_tokens(system), "truncated": False, **why}
        return AssembledPrompt(messages=messages, sections=report, notes=notes)

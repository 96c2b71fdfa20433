"""Every attribute the gateway knows, in one place: what ``/api/attributes`` lists and what the
stores accept. Declaring a spec has no side effect; it counts once it is listed here."""

from __future__ import annotations

from gateway.conversation.attributes import CONVERSATION_META, CUSTOM_PROMPT_SECTION, RAG, AttributeSpec
from gateway.knowledge.appends import (
    APPEND_TEXT,
    APPEND_TEXT_RESET,
    APPEND_WEBSITES,
    APPEND_WEBSITES_REFRESH,
    APPEND_WEBSITES_RESET,
)
from gateway.live.calendar import BUSINESS_HOURS, CALENDAR, CLOSED_DATES, TIMEZONE
from gateway.live.data_injection import (
    ENABLED,
    FETCHED_AT,
    NEEDS_SUMMARY,
    PAYLOAD,
    PERIOD,
    RETRIEVED,
    STATUS,
    URL,
)
from gateway.live.prompt import AGENT_NAME, BUSINESS_INSTRUCTIONS, BUSINESS_NAME

__all__ = ["CUSTOMER_ATTRIBUTES", "PERSONA_ATTRIBUTES"]


def _by_name(*specs: AttributeSpec) -> dict[str, AttributeSpec]:
    return {spec.name: spec for spec in specs}


PERSONA_ATTRIBUTES = _by_name(RAG, CONVERSATION_META, CUSTOM_PROMPT_SECTION)

CUSTOMER_ATTRIBUTES = _by_name(
    AGENT_NAME, BUSINESS_NAME, BUSINESS_INSTRUCTIONS,
    TIMEZONE, BUSINESS_HOURS, CLOSED_DATES, CALENDAR,
    ENABLED, PERIOD, NEEDS_SUMMARY, URL, PAYLOAD, RETRIEVED, FETCHED_AT, STATUS,
    APPEND_TEXT, APPEND_TEXT_RESET, APPEND_WEBSITES, APPEND_WEBSITES_RESET, APPEND_WEBSITES_REFRESH,
)

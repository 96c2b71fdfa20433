"""Typed conversation events and the bus later features subscribe to (RAG preparation, meta extraction)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from gateway.core.models import Conversation, EndReason, Persona

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConversationStarted:
    persona: Persona
    conversation: Conversation


@dataclass(frozen=True)
class ConversationEnded:
    persona_id: str
    conversation: Conversation
    reason: EndReason


@dataclass(frozen=True)
class AttributeChanged:
    """A customer (project) attribute was written."""

    name: str


@dataclass(frozen=True)
class TurnCompleted:
    persona_id: str
    conversation_id: str
    turn_id: str


Event = ConversationStarted | ConversationEnded | TurnCompleted | AttributeChanged
Handler = Callable[[Event], Awaitable[None]]


class EventBus:
    """Handlers run in subscription order; one failing handler is logged and does not stop the rest."""

    def __init__(self) -> None:
        self._handlers: dict[type, list[Handler]] = defaultdict(list)

    def subscribe(self, event_type: type, handler: Handler) -> None:
        self._handlers[event_type].append(handler)

    async def publish(self, event: Event) -> None:
        for handler in self._handlers[type(event)]:
            try:
                await handler(event)
            except Exception:
                log.exception("event handler %s failed for %s", handler, type(event).__name__)

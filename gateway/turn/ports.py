"""What a turn talks to: where its reply goes (a channel's sink, and what the channel can show),
and the prompt it asks the assembler for."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from gateway.core.models import Message, PromptMessage
from gateway.turn.citations import CitationStyle
from gateway.turn.responders import Reply, Responder

__all__ = ["AssembledPrompt", "Capabilities", "DeliveryReport", "IdempotentSink", "Markup", "MessageTemplate",
           "RagMode", "PromptAssembler", "PromptInputs", "RatedSink", "ReplySink", "TemplateSink", "TranscriptSink",
           "TurnPlan"]


Markup = Literal["plain", "html", "mrkdwn", "markdown"]
# How a channel's turns get their knowledge-base context: in the turn, or as a queued job the reply
# waits for a bounded time (a phone call cannot stay silent while retrieval runs).
RagMode = Literal["inline", "queued"]


@dataclass(frozen=True)
class Capabilities:
    """What a channel can show; the reply renderer adapts to it."""

    max_length: int
    markup: Markup = "plain"
    streaming: bool = False
    typing: bool = False
    edit: bool = False
    voice: bool = False
    rag_mode: RagMode = "inline"
    handoff: bool = True  # a person can take its conversations over from the console (not a live call)
    citations: CitationStyle = "footnote"  # how it shows a reply's sources (gateway.turn.citations)
    templates: bool = False  # an operator can send the vendor's approved templates (WhatsApp's 24-hour window)


@dataclass(frozen=True)
class DeliveryReport:
    delivered: bool
    parts: int = 1
    external_ids: tuple[str, ...] = ()
    error: str | None = None
    retryable: bool = False  # it failed for a reason that may pass (vendor 5xx, network, rate limit)
    interrupted: bool = False  # cut off by the listener (a caller barging in): only part of it went out
    left: bool = False  # the customer left before it was finished (a chat page closed mid-stream, a hang-up)


@runtime_checkable
class ReplySink(Protocol):
    """Where a turn's reply goes. ``delta`` is called only when the channel streams."""

    streaming: bool

    async def delta(self, text: str) -> None: ...

    async def deliver(self, text: str) -> DeliveryReport: ...


class TranscriptSink:
    """Where an operator's reply goes on a channel with no vendor to send through (web chat, the agent
    API): it is stored, and the channel shows it from the transcript (the open chat page over its
    socket, an API caller on its next call)."""

    streaming = False

    def __init__(self, channel: str) -> None:
        self.channel = channel

    async def delta(self, text: str) -> None:  # pragma: no cover - not streaming
        pass

    async def deliver(self, text: str) -> DeliveryReport:
        return DeliveryReport(delivered=True)


@runtime_checkable
class IdempotentSink(Protocol):
    """A sink whose vendor drops a repeated send carrying the same idempotency key (Twilio). A turn
    delivers through ``deliver_keyed`` with a key of its own, so a turn resumed after its process died
    mid-send can send again safely."""

    async def deliver_keyed(self, text: str, key: str) -> DeliveryReport: ...


@runtime_checkable
class RatedSink(Protocol):
    """A sink that puts rating buttons under a reply (Telegram's inline keyboard, Slack's buttons), in the
    reply's own send: the buttons name the stored reply they rate, ``message_id``."""

    async def deliver_rated(self, text: str, message_id: str) -> DeliveryReport: ...


@dataclass(frozen=True)
class MessageTemplate:
    """A message the vendor approved in advance, which a business may send when a free reply is refused
    (WhatsApp outside its 24-hour window); ``text`` is its body as the customer reads it."""

    name: str
    language: str
    text: str = ""


@runtime_checkable
class TemplateSink(Protocol):
    """A sink on a channel with ``Capabilities.templates``: the account's approved templates, and sending
    one (its vendor message id remembered with ``stored_message_id``, the operator's stored message)."""

    async def templates(self) -> list[MessageTemplate]: ...

    async def send_template(self, template: MessageTemplate, stored_message_id: str) -> DeliveryReport: ...


@dataclass
class AssembledPrompt:
    messages: list[PromptMessage]
    sections: dict[str, dict[str, int | bool]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what went wrong while assembling, for the trace


@dataclass
class PromptInputs:
    persona_id: str
    channel: str
    memory: list[Message]
    rag: str = ""
    variables: dict[str, object] = field(default_factory=dict)
    read: list | None = None  # the answers to the assembler's ``read_into``, when read with the turn lock


class PromptAssembler(Protocol):
    def read_into(self, pipe: Any, persona_id: str) -> int:
        """Queue the reads ``build`` needs in ``pipe`` (the round trip that takes the turn lock); returns
        how many commands it queued (0: it reads nothing). ``build`` gets their answers as ``inputs.read``."""
        ...

    async def build(self, inputs: PromptInputs) -> AssembledPrompt: ...


class TurnPlan(Protocol):
    """The parts of a turn its entry chooses, where they differ from the channels' (an agent API call
    answers with its agent version's retrieval, system prompt, model options and output checks).

    Everything else — dedup, the conversation and its lock, the handoff gate, memory, delivery through
    the sink, the trace — is the one pipeline's, whatever the entry. A turn without a plan uses the
    pipeline's own preparers, prompt template and responder."""

    preparers: Sequence[Any]  # ContextPreparers: they fill the turn's context, hits, sources, citations
    prompts: PromptAssembler
    responder: Responder
    memory_since: datetime | None  # memory starts here (an API session's conversation), None: all of it
    holds_stream: bool  # the reply may still change after the model (guardrails, a check): sent whole
    raises_llm_errors: bool  # a failed model call is the caller's error (502), not the fallback message

    async def finish(self, turn: Any, prompt: Sequence[PromptMessage], reply: Reply) -> Reply:
        """The output checks on the model's reply, before it is cited, stored and delivered."""
        ...

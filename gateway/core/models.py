"""The one vocabulary every channel speaks after its adapter: typed, frozen where it can be."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from rag_core.clean_text import scrub

# Text from outside (vendors, the language model, stored data) that must always encode as UTF-8.
Text = Annotated[str, AfterValidator(scrub)]


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return uuid.uuid4().hex


class Role(StrEnum):
    USER = "user"
    AGENT = "agent"
    OPERATOR = "operator"  # a person replying from the console during a handoff
    SYSTEM = "system"  # a note in the transcript (a handoff began or ended); never sent to the model


class EndReason(StrEnum):
    """Why a conversation ended."""

    TIMEOUT = "timeout"  # idle past SWITCHBOARD_INACTIVITY_TIMEOUT_S
    RESTART = "restart"  # the user asked to start over (Telegram /start)
    CALL_ENDED = "call_ended"  # the phone call hung up


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    # A turn resumed after its process died while sending, on a channel with no idempotency key: the reply
    # may or may not have reached the user, and it is not sent again (it could arrive twice).
    UNCERTAIN = "uncertain"
    # The listener cut the reply off (a caller speaking over it, a call's socket dropping): the stored text
    # is what went out before that, not what the model wrote.
    INTERRUPTED = "interrupted"


class Attachment(BaseModel):
    """Metadata only: never a vendor URL that embeds a secret (Telegram file URLs carry the token)."""

    model_config = ConfigDict(frozen=True)

    kind: str  # photo, voice, sticker, location, document, ...
    file_id: str | None = None
    mime_type: str | None = None
    size: int | None = None
    description: str | None = None
    seconds: float | None = None  # a voice note's or video's length, by the vendor's word (issue 44)
    filename: str | None = None  # a document's name, as the sender gave it (issue 44)


class InboundMessage(BaseModel):
    """A message as every channel adapter hands it to the gateway."""

    model_config = ConfigDict(frozen=True)

    channel: str
    external_user_id: Text
    external_message_id: Text
    identity: Text  # persona identity key, e.g. "phone:+15551234567", "telegram:42", "web:<session>"
    text: Text
    thread: Text | None = None
    attachments: tuple[Attachment, ...] = ()
    display_name: Text | None = None
    received_at: datetime = Field(default_factory=utcnow)
    # conn (issue 28): set at the webhook from the channel connection the message came through
    connection: str | None = None  # its id; None: the environment-configured channel
    agent: str | None = None  # the agent answering (``id`` or ``id@version``); None: the channels' agent
    # media (issue 44): what came besides typed text, said in words ("voice note, transcribed (3.2 s)")
    media: Text | None = None


class Persona(BaseModel):
    """One end user across every channel."""

    id: str = Field(default_factory=new_id)
    identities: list[Text] = Field(default_factory=list)
    display_name: Text | None = None
    created_at: datetime = Field(default_factory=utcnow)

    @property
    def shown_name(self) -> str:
        """What an operator reads: the name the channel gave, else the number or channel user id."""
        if self.display_name:
            return self.display_name
        for identity in self.identities:
            kind, _, value = identity.partition(":")
            if kind == "phone" and value:
                return value
            if kind in ("telegram", "slack") and value:
                return f"{kind.capitalize()} user {value}"
        if any(identity.startswith("web:") for identity in self.identities):
            return f"Web visitor {self.id[:6]}"
        return self.id[:8]


class Conversation(BaseModel):
    id: str = Field(default_factory=new_id)
    persona_id: str
    channel: str
    thread: str | None = None
    started_at: datetime = Field(default_factory=utcnow)
    last_activity_at: datetime = Field(default_factory=utcnow)
    ended_at: datetime | None = None
    end_reason: EndReason | None = None
    connection: str | None = None  # conn (issue 28): the channel connection it came through

    @property
    def active(self) -> bool:
        return self.ended_at is None


# How replies cite the knowledge they used (SWITCHBOARD_CITATIONS_FORMAT, or an agent's ``citations``).
CitationFormat = Literal["structured", "inline", "footnote", "none"]


class SourceRef(BaseModel):
    """A knowledge-base topic an agent reply was given, numbered as the prompt showed it ([n])."""

    model_config = ConfigDict(frozen=True)

    n: int = Field(ge=1)
    source: str
    title: Text
    score: float = 0.0
    url: str | None = None  # the page or document it came from, when known
    cited: bool = False  # the reply refers to it with [n]


class Message(BaseModel):
    id: str = Field(default_factory=new_id)
    conversation_id: str
    persona_id: str
    role: Role
    channel: str  # the channel actor that carried it
    text: Text
    external_id: Text | None = None
    created_at: datetime = Field(default_factory=utcnow)
    turn_id: str | None = None
    delivery: DeliveryStatus | None = None
    delivery_error: Text | None = None
    sources: list[SourceRef] = Field(default_factory=list)  # agent replies: the knowledge they were given
    author: Text | None = None  # an operator's reply: the name the customer sees on it
    notice: Text | None = None  # a console note the customer is told too ("Sam joined the conversation")
    media: Text | None = None  # a user message's media, said in words ("voice note, transcribed (3.2 s)")


class StageTiming(BaseModel):
    stage: str
    ms: float
    cpu_ms: float | None = None  # process CPU time meanwhile (exact when turns do not overlap)


class TokenUsage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class PromptMessage(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: str  # "system" | "user" | "assistant"
    content: Text
    # media (issue 44): images the model sees with this message, as data URLs; never stored with a trace
    images: tuple[str, ...] = Field(default=(), exclude=True, repr=False)

    def wire(self) -> dict:
        """The message as the chat completions API takes it: content parts when it carries images."""
        if not self.images:
            return {"role": self.role, "content": self.content}
        parts: list[dict] = [{"type": "text", "text": self.content}] if self.content else []
        parts += [{"type": "image_url", "image_url": {"url": url}} for url in self.images]
        return {"role": self.role, "content": parts}


class CandidateTrace(BaseModel):
    """A topic retrieval considered, with its score (0 when the strategy gives none)."""

    source: str
    score: float = 0.0


class RetrievalTrace(BaseModel):
    strategy: str | None = None
    candidates: list[CandidateTrace] = Field(default_factory=list)
    selected: list[str] = Field(default_factory=list)
    scores: dict[str, float] = Field(default_factory=dict)  # each selected topic's calibrated score (0-1)
    legs: dict[str, dict[str, float]] = Field(default_factory=dict)  # ... and its legs' raw scores
    fallback: Text | None = None
    skipped: Text | None = None
    timings_ms: dict[str, float] = Field(default_factory=dict)
    cache: str = "off"  # the semantic cache: hit, miss or off
    notes: list[Text] = Field(default_factory=list)  # what the retrieval controls did
    left_out: dict[str, list[str]] = Field(default_factory=dict)  # topics a control removed, by control


class ToolCallTrace(BaseModel):
    """One tool call the model made in a turn (agentic retrieval, an agent's tools), as the console shows it."""

    name: str
    arguments: dict = Field(default_factory=dict)
    result_count: int = 0
    knowledge_bases: list[str] = Field(default_factory=list)
    failed_kbs: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)  # the topics it returned, best first
    ms: float = 0.0
    error: Text | None = None
    result: Text | None = None  # an agent tool's answer (issue 40), cut to SWITCHBOARD_TOOL_RESULT_MAX_CHARS
    reused: bool = False  # the answer a run of this turn stored before: the tool was not called again


class CitationTrace(BaseModel):
    """What the reply cited: valid ``[N]`` markers, and ones naming no source (removed when verified)."""

    format: CitationFormat
    verify: bool = True
    cited: list[int] = Field(default_factory=list)
    invalid: list[int] = Field(default_factory=list)


class ModelCallTrace(BaseModel):
    """A model call of a turn besides its reply (insight, issue 41): structured generation — the
    retrieval's LLM selection and query rewrite, the agent API's checks — with what the server reported."""

    kind: str
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


class TurnTrace(BaseModel):
    # Filled field by field as the turn goes; every assignment is checked so the trace always stores.
    model_config = ConfigDict(validate_assignment=True)

    turn_id: str = Field(default_factory=new_id)
    conversation_id: str
    persona_id: str
    channel: str
    user_message_id: str
    connection: str | None = None  # conn (issue 28): the channel connection, None for the environment's
    agent: str | None = None  # conn (issue 28): the agent that answered, None for the channels' agent
    api_key: str | None = None  # insight (issue 41): the id of the API key that called the agent API
    agent_message_id: str | None = None
    model: str | None = None
    responder: str = "llm"  # "llm" | "offline" | "fallback"
    prompt: list[PromptMessage] = Field(default_factory=list)
    reply: Text | None = None
    stages: list[StageTiming] = Field(default_factory=list)
    usage: TokenUsage | None = None
    model_calls: list[ModelCallTrace] = Field(default_factory=list)  # the turn's other model calls (insight)
    retrieval: RetrievalTrace | None = None
    tool_calls: list[ToolCallTrace] = Field(default_factory=list)  # agentic retrieval: what the model searched
    citations: CitationTrace | None = None
    checks: dict[str, Text] = Field(default_factory=dict)  # the agent API's checks: multihop, hallucination
    sections: dict[str, dict[str, int | bool]] = Field(default_factory=dict)
    error: Text | None = None
    delivery_error: Text | None = None
    delivery_retryable: bool = False  # the failure may pass (vendor 5xx, network): the inbox sends it again
    abandoned: bool = False  # the customer left before the reply was finished (insight, issue 41)
    # Why the bot did not answer or its answer was not delivered: the conversation was handed off
    # (before the turn, or while it ran); the user's message stays in the transcript for the operator.
    suppressed: Text | None = None
    handoff: Text | None = None  # a handoff this turn started (the user asked for a person, or the model did)
    media: list[Text] = Field(default_factory=list)  # media (issue 44): what the turn made of the customer's media
    started_at: datetime = Field(default_factory=utcnow)
    total_ms: float = 0.0
    # Redis round trips of the turn until its trace is stored, and the client CPU they took (redis_tally)
    redis_round_trips: int = 0
    redis_cpu_ms: float = 0.0

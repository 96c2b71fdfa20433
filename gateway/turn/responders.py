"""Who writes the reply: the language model, or the offline responder when none is configured."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gateway.core.models import PromptMessage, TokenUsage, ToolCallTrace
from gateway.core.settings import Settings
from gateway.turn.llm import CallOptions, LLMClient, model_of
from rag_core.tokenizer import tokenize

log = logging.getLogger(__name__)
DeltaCallback = Callable[[str], Awaitable[None]]
NO_MODEL_NOR_KNOWLEDGE = ("a visitor was answered %r: no language model is configured and the knowledge base is "
                          "empty; set SWITCHBOARD_LLM_API_KEY (or SWITCHBOARD_LLM_BASE_URL) or add knowledge")


@dataclass(frozen=True)
class KnowledgeHit:
    """A knowledge-base topic the turn's retrieval found, as the offline responder needs it."""

    source: str
    title: str
    summary: str
    score: float
    facts: tuple[str, ...] = ()


@dataclass(frozen=True)
class ToolEvent:
    """A tool call starting (``kind`` "call") or done (``kind`` "result"), for a channel to show: the web
    chat's progress line, the agent API's stream events, a phone call's filler."""

    kind: str  # "call" | "result"
    call_id: str
    name: str  # ``crm.book_table``
    arguments: dict  # secrets masked
    output: str | None = None  # the result as the model reads it (cut), on "result"
    error: str | None = None
    ms: float | None = None


ToolListener = Callable[[ToolEvent], Awaitable[None]]


@dataclass
class ReplyRequest:
    prompt: Sequence[PromptMessage]
    hits: Sequence[KnowledgeHit] = ()
    on_delta: DeltaCallback | None = None
    agentic: bool = False  # the model searches the knowledge base itself (query_knowledge); none was injected
    kbs: Sequence[str] | None = None  # the knowledge bases its searches may reach (None: the responder's own)
    on_tool: ToolListener | None = None  # the sink's ``tool_event``: told as each tool call starts and ends
    options: CallOptions | None = None  # the turn's agent's model and sampling (None: the settings')


@dataclass
class Reply:
    text: str
    responder: str
    model: str | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)
    tool_calls: list[ToolCallTrace] = field(default_factory=list)
    handoff: str | None = None  # the model called the built-in ``handoff`` tool: why (the turn asks for a person)
    # Answers a channel may offer as buttons (a proposed action's "Yes" / "No"); pressing one sends its text.
    choices: list[str] = field(default_factory=list)


class Responder(Protocol):
    """Produces a reply from the assembled prompt; streams through ``on_delta`` when given."""

    async def reply(self, request: ReplyRequest) -> Reply: ...


class LLMResponder:
    """The model's reply, with the request's call options (the turn's agent's model, temperature, length,
    retries) or else ``options``; ``Reply.model`` names the model actually called."""

    def __init__(self, llm: LLMClient, options: CallOptions | None = None) -> None:
        self.llm = llm
        self.options = options

    async def reply(self, request: ReplyRequest) -> Reply:
        options = request.options or self.options
        model = model_of(options, self.llm.model)
        if request.on_delta is None:
            done = await self.llm.complete(request.prompt, options)
            return Reply(text=done.text, responder="llm", model=model, usage=done.usage)
        usage = TokenUsage()
        parts: list[str] = []
        async for piece in self.llm.stream(request.prompt, usage, options):
            parts.append(piece)
            await request.on_delta(piece)
        return Reply(text="".join(parts), responder="llm", model=model, usage=usage)


class OfflineResponder:
    """No language model: answer with the best knowledge-base topic when it clearly matches.

    Retrieval scores are relative (fused ranks), so confidence is absolute and lexical instead:
    the share of the question's content words (stemmed, stop words dropped) that the best topic
    contains. At ``offline_min_score`` or above the reply is that topic; below it,
    ``offline_unknown_message``; with an empty knowledge base ``offline_message``, in a visitor's
    words — what the operator should set is said in the log (and on the console's Overview).
    """

    def __init__(self, settings: Settings, topic_count: Callable[[], Awaitable[int]] | None = None) -> None:
        self.settings = settings
        self.topic_count = topic_count

    async def reply(self, request: ReplyRequest) -> Reply:
        question = next((m.content for m in reversed(request.prompt) if m.role == "user"), "")
        best = request.hits[0] if request.hits else None
        if best is not None and coverage(question, best) >= self.settings.offline_min_score:
            text = f"{best.title}\n\n{best.summary}".strip()
        elif self.topic_count is not None and await self.topic_count() > 0:
            text = self.settings.offline_unknown_message
        else:
            text = self.settings.offline_message
            log.warning(NO_MODEL_NOR_KNOWLEDGE, text)
        if request.on_delta is not None:
            await request.on_delta(text)
        return Reply(text=text, responder="offline")


def coverage(question: str, hit: KnowledgeHit) -> float:
    asked = set(tokenize(question))
    if not asked:
        return 0.0
    known = set(tokenize(" ".join((hit.title, *hit.facts, hit.summary))))
    return len(asked & known) / len(asked)

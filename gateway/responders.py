"""Who writes the reply: the language model, or the offline responder when none is configured."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gateway.llm import LLMClient
from gateway.models import PromptMessage, TokenUsage
from gateway.settings import Settings

DeltaCallback = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class KnowledgeHit:
    """A knowledge-base topic the turn's retrieval found, as the offline responder needs it."""

    source: str
    title: str
    summary: str
    score: float


@dataclass
class ReplyRequest:
    prompt: Sequence[PromptMessage]
    hits: Sequence[KnowledgeHit] = ()
    on_delta: DeltaCallback | None = None


@dataclass
class Reply:
    text: str
    responder: str
    model: str | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)


class Responder(Protocol):
    """Produces a reply from the assembled prompt; streams through ``on_delta`` when given."""

    async def reply(self, request: ReplyRequest) -> Reply: ...


class LLMResponder:
    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm

    async def reply(self, request: ReplyRequest) -> Reply:
        if request.on_delta is None:
            done = await self.llm.complete(request.prompt)
            return Reply(text=done.text, responder="llm", model=self.llm.model, usage=done.usage)
        usage = TokenUsage()
        parts: list[str] = []
        async for piece in self.llm.stream(request.prompt, usage):
            parts.append(piece)
            await request.on_delta(piece)
        return Reply(text="".join(parts), responder="llm", model=self.llm.model, usage=usage)


class OfflineResponder:
    """No language model: answer with the best knowledge-base topic when it is a confident match.

    With no topic above ``offline_min_score`` the reply is ``offline_unknown_message``; with no
    knowledge base at all it says plainly that no language model is configured.
    """

    def __init__(self, settings: Settings, has_knowledge_base: bool) -> None:
        self.settings = settings
        self.has_knowledge_base = has_knowledge_base

    async def reply(self, request: ReplyRequest) -> Reply:
        best = max(request.hits, key=lambda h: h.score, default=None)
        if best is not None and best.score >= self.settings.offline_min_score:
            text = f"{best.title}\n\n{best.summary}".strip()
        elif self.has_knowledge_base:
            text = self.settings.offline_unknown_message
        else:
            text = self.settings.offline_message
        if request.on_delta is not None:
            await request.on_delta(text)
        return Reply(text=text, responder="offline")

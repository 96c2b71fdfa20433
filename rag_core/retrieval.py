"""The retrieval vocabulary every strategy speaks: request, result, and the strategy protocol."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from rag_core.calibration import calibrated_score
from rag_core.generation import StructuredGenerator
from rag_core.kb_group import KnowledgeBaseGroup
from rag_core.knowledge_base import KnowledgeBase, ScoredTopic
from rag_core.topic import Topic

Role = Literal["user", "agent"]


class ChatTurn(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Role = "user"
    text: str


class SearchRequest(BaseModel):
    """``query`` is the last user message; ``history`` holds the turns before it, oldest first."""

    model_config = ConfigDict(frozen=True)

    query: str
    history: list[ChatTurn] = Field(default_factory=list)
    k: int = Field(default=3, ge=1, le=100)
    conversation_meta: str = ""

    @property
    def conversation(self) -> list[ChatTurn]:
        return [*self.history, ChatTurn(role="user", text=self.query)]


class Hit(BaseModel):
    """``score`` is calibrated to 0-1 (see ``rag_core.calibration`` for its meaning per strategy);
    ``legs`` holds the raw score of each retrieval leg that found the topic."""

    model_config = ConfigDict(frozen=True)

    topic: Topic
    score: float
    legs: dict[str, float] = Field(default_factory=dict)


class Candidate(BaseModel):
    model_config = ConfigDict(frozen=True)

    source: str
    score: float | None = None


class SearchResult(BaseModel):
    """What a strategy returns and what a turn trace records."""

    model_config = ConfigDict(frozen=True)

    strategy: str
    hits: list[Hit]
    candidates: list[Candidate] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    prompt_tokens: int | None = None
    fell_back: bool = False
    fallback_reason: str | None = None
    # What the retrieval controls did (rag_core.controlled): plain sentences for the trace and the console,
    # and the topics each control left out, by control ("relevance_threshold", "max_context_tokens", ...).
    notes: list[str] = Field(default_factory=list)
    left_out: dict[str, list[str]] = Field(default_factory=dict)
    queries: list[str] = Field(default_factory=list)  # the queries searched, when shaping changed them
    cache: Literal["hit", "miss", "off"] = "off"  # the gateway's semantic cache

    @property
    def topics(self) -> list[Topic]:
        return [hit.topic for hit in self.hits]


@runtime_checkable
class RetrievalStrategy(Protocol):
    """One way of ranking knowledge-base topics for a conversation turn. Implementations live
    in one module each under ``rag_core.strategies`` and are listed in its ``STRATEGIES``
    registry; the shared contract tests run every registered strategy."""

    name: str

    async def search(self, request: SearchRequest) -> SearchResult: ...


@dataclass(frozen=True)
class StrategyContext:
    """Everything a strategy factory may draw on. ``options`` carries per-strategy
    constructor overrides keyed by strategy name, e.g. ``{"hybrid": {"rrf_k": 30}}``."""

    knowledge_base: KnowledgeBase | KnowledgeBaseGroup
    generator: StructuredGenerator | None = None
    options: dict[str, dict[str, Any]] = field(default_factory=dict)

    def options_for(self, name: str) -> dict[str, Any]:
        return dict(self.options.get(name, {}))


def calibrated_hit(scored: ScoredTopic, leg: str | None) -> Hit:
    legs = scored.legs or ({leg: round(scored.score, 6)} if leg else {})
    return Hit(topic=scored.topic, score=calibrated_score(legs), legs=legs)


def ranked_result(
    strategy: str,
    scored: list[ScoredTopic],
    k: int,
    timings_ms: dict[str, float],
    *,
    candidate_k: int,
    fallback_reason: str | None = None,
    leg: str | None = None,
) -> SearchResult:
    """A result whose hits are the first ``k`` of ``scored`` and candidates its first
    ``candidate_k``, scores calibrated; ``leg`` names the one leg whose raw scores ``scored`` holds."""
    hits = [calibrated_hit(s, leg) for s in scored[: max(k, candidate_k)]]
    return SearchResult(
        strategy=strategy,
        hits=hits[:k],
        candidates=[Candidate(source=h.topic.source, score=h.score) for h in hits[:candidate_k]],
        timings_ms=timings_ms,
        fell_back=fallback_reason is not None,
        fallback_reason=fallback_reason,
    )

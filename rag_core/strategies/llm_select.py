from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rag_core.errors import SwitchboardError
from rag_core.generation import StructuredGenerator
from rag_core.knowledge_base import KnowledgeBase
from rag_core.retrieval import (
    Candidate,
    Hit,
    SearchRequest,
    SearchResult,
    StrategyContext,
)
from rag_core.search_prompt import SEARCH_RESULT_SCHEMA, build_search_prompt, parse_selection
from rag_core.strategies.hybrid import HybridStrategy
from rag_core.timing import StageTimer
from rag_core.tokens import estimate_tokens
from rag_core.topic import Topic

NO_GENERATOR = "no structured generator configured"
# A valid answer that picks nothing is not trusted either: a model that always answers "none" would leave
# every turn without knowledge. The ranking's best results go to the controls (the relevance threshold) instead.
SELECTED_NOTHING = "the search model selected no article; the hybrid ranking's best results were used instead"


@dataclass(frozen=True)
class Selection:
    """The search LLM's verdict: chosen ids, or the reason there are none to trust."""

    ids: list[str]
    prompt_tokens: int
    failure: str | None = None


class ArticleSelector:
    def __init__(self, generator: StructuredGenerator | None) -> None:
        self._generator = generator

    async def select(self, request: SearchRequest, articles: Sequence[Topic]) -> Selection:
        prompt = build_search_prompt(request, articles)
        tokens = estimate_tokens(prompt)
        if self._generator is None:
            return Selection(ids=[], prompt_tokens=tokens, failure=NO_GENERATOR)
        try:
            answer = await self._generator.structured_generation(prompt, SEARCH_RESULT_SCHEMA)
            return Selection(ids=parse_selection(answer), prompt_tokens=tokens)
        except SwitchboardError as exc:
            return Selection(ids=[], prompt_tokens=tokens, failure=f"{type(exc).__name__}: {exc}")


def selected_hits(
    ids: Sequence[str], topics: Sequence[Topic], k: int, scored: Mapping[str, Hit] | None = None
) -> list[Hit]:
    """Topics in the LLM's order; ids it invented or repeated are already gone. A topic keeps the
    calibrated score its prefilter gave it (``scored``); without one (``llm_select`` over the whole
    pool) the score is 1 / the LLM's rank, which is an order, not a probability."""
    by_source = {topic.source: topic for topic in topics}
    chosen = [by_source[id_] for id_ in ids if id_ in by_source][:k]
    hits = []
    for rank, topic in enumerate(chosen, start=1):
        prior = (scored or {}).get(topic.source)
        legs = {**(prior.legs if prior else {}), "llm_rank": float(rank)}
        hits.append(Hit(topic=topic, score=prior.score if prior else round(1.0 / rank, 6), legs=legs))
    return hits


async def fallback_result(
    name: str,
    hybrid: HybridStrategy,
    request: SearchRequest,
    timer: StageTimer,
    selection: Selection,
) -> SearchResult:
    fallback = await hybrid.search(request)
    timings = {**timer.finish(), **{f"fallback_{k}": v for k, v in fallback.timings_ms.items()}}
    return fallback.model_copy(
        update={
            "strategy": name,
            "timings_ms": timings,
            "prompt_tokens": selection.prompt_tokens,
            "fell_back": True,
            "fallback_reason": selection.failure,
        }
    )


class LlmSelectStrategy:
    """The seed's PrepareRagContext search: list the whole ``rag_context`` pool (newest first,
    up to ``pool_size``) to a search LLM, fetch the ids it picks by exact source. Invalid LLM
    output falls back to ``hybrid``."""

    name = "llm_select"

    def __init__(
        self,
        knowledge_base: KnowledgeBase,
        generator: StructuredGenerator | None,
        *,
        fallback: HybridStrategy | None = None,
        pool_size: int = 300,
    ) -> None:
        self._kb = knowledge_base
        self._selector = ArticleSelector(generator)
        self._fallback = fallback or HybridStrategy(knowledge_base)
        self._pool_size = pool_size

    @classmethod
    def from_context(cls, context: StrategyContext) -> LlmSelectStrategy:
        return cls(
            context.knowledge_base,
            context.generator,
            fallback=HybridStrategy.from_context(context),
            **context.options_for(cls.name),
        )

    async def search(self, request: SearchRequest) -> SearchResult:
        timer = StageTimer()
        with timer.stage("pool"):
            pool = await self._kb.rag_pool(self._pool_size)
        if not pool:
            return SearchResult(strategy=self.name, hits=[], timings_ms=timer.finish())
        with timer.stage("llm"):
            selection = await self._selector.select(request, pool)
        if selection.failure is not None:
            return await fallback_result(self.name, self._fallback, request, timer, selection)
        with timer.stage("fetch"):
            fetched = await self._kb.get_many(selection.ids)
        hits = selected_hits(selection.ids, [t for t in fetched if t.in_rag_pool], request.k)
        if not hits:
            nothing = Selection(ids=[], prompt_tokens=selection.prompt_tokens, failure=SELECTED_NOTHING)
            return await fallback_result(self.name, self._fallback, request, timer, nothing)
        return SearchResult(
            strategy=self.name,
            hits=hits,
            candidates=[Candidate(source=topic.source) for topic in pool],
            timings_ms=timer.finish(),
            prompt_tokens=selection.prompt_tokens,
        )

from __future__ import annotations

from rag_core.generation import StructuredGenerator
from rag_core.knowledge_base import KnowledgeBase
from rag_core.retrieval import SearchRequest, SearchResult, StrategyContext
from rag_core.strategies.hybrid import HybridStrategy
from rag_core.strategies.llm_select import SELECTED_NOTHING, ArticleSelector, selected_hits
from rag_core.timing import StageTimer


class HybridLlmStrategy:
    """``hybrid`` narrows the pool to ``candidate_k`` topics, then the search LLM picks among
    those only, with the same prompt and schema as ``llm_select``. When it fails or picks none of
    them, the prefilter's best ``k`` stand (and the result says it fell back)."""

    name = "hybrid_llm"

    def __init__(
        self,
        knowledge_base: KnowledgeBase,
        generator: StructuredGenerator | None,
        *,
        prefilter: HybridStrategy | None = None,
        candidate_k: int = 20,
    ) -> None:
        self._prefilter = prefilter or HybridStrategy(knowledge_base)
        self._selector = ArticleSelector(generator)
        self._candidate_k = candidate_k

    @classmethod
    def from_context(cls, context: StrategyContext) -> HybridLlmStrategy:
        return cls(
            context.knowledge_base,
            context.generator,
            prefilter=HybridStrategy.from_context(context),
            **context.options_for(cls.name),
        )

    async def search(self, request: SearchRequest) -> SearchResult:
        timer = StageTimer()
        with timer.stage("prefilter"):
            prefiltered = await self._prefilter.search(
                request.model_copy(update={"k": max(self._candidate_k, request.k)})
            )
        candidates = [hit.topic for hit in prefiltered.hits]
        # The prefilter's own stages (embed, sparse, dense, fuse) stay in the trace beside its total.
        legs = {k: v for k, v in prefiltered.timings_ms.items() if k != "total"}
        if not candidates:
            return prefiltered.model_copy(update={"strategy": self.name})
        with timer.stage("llm"):
            selection = await self._selector.select(request, candidates)
        scored = {h.topic.source: h for h in prefiltered.hits}
        hits = [] if selection.failure is not None else selected_hits(selection.ids, candidates, request.k, scored)
        if not hits:  # failed, or picked nothing it was shown: the prefilter's ranking stands
            return prefiltered.model_copy(
                update={
                    "strategy": self.name,
                    "hits": prefiltered.hits[: request.k],
                    "timings_ms": {**legs, **timer.finish()},
                    "prompt_tokens": selection.prompt_tokens,
                    "fell_back": True,
                    "fallback_reason": selection.failure or SELECTED_NOTHING,
                }
            )
        return prefiltered.model_copy(
            update={
                "strategy": self.name,
                "hits": hits,
                "timings_ms": {**legs, **timer.finish()},
                "prompt_tokens": selection.prompt_tokens,
            }
        )

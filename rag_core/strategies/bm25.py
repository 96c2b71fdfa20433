from __future__ import annotations

from rag_core.knowledge_base import KnowledgeBase
from rag_core.query_shape import QueryShape
from rag_core.retrieval import SearchRequest, SearchResult, StrategyContext, ranked_result
from rag_core.timing import StageTimer


class Bm25Strategy:
    name = "bm25"

    def __init__(
        self, knowledge_base: KnowledgeBase, *, shape: QueryShape | None = None, candidate_k: int = 20
    ) -> None:
        self._kb = knowledge_base
        self._shape = shape or QueryShape()
        self._candidate_k = candidate_k

    @classmethod
    def from_context(cls, context: StrategyContext) -> Bm25Strategy:
        return cls(context.knowledge_base, **context.options_for(cls.name))

    async def search(self, request: SearchRequest) -> SearchResult:
        timer = StageTimer()
        with timer.stage("sparse"):
            scored = await self._kb.search_sparse(self._shape.sparse_query(request), max(request.k, self._candidate_k))
        return ranked_result(self.name, scored, request.k, timer.finish(), candidate_k=self._candidate_k, leg="bm25")

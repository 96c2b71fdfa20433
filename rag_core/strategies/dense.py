from __future__ import annotations

from rag_core.knowledge_base import KnowledgeBase
from rag_core.query_shape import QueryShape
from rag_core.retrieval import SearchRequest, SearchResult, StrategyContext, ranked_result
from rag_core.timing import StageTimer

SPARSE_ONLY = "dense encoder unavailable: answered from bm25"


class DenseStrategy:
    name = "dense"

    def __init__(
        self, knowledge_base: KnowledgeBase, *, shape: QueryShape | None = None, candidate_k: int = 20
    ) -> None:
        self._kb = knowledge_base
        self._shape = shape or QueryShape()
        self._candidate_k = candidate_k

    @classmethod
    def from_context(cls, context: StrategyContext) -> DenseStrategy:
        return cls(context.knowledge_base, **context.options_for(cls.name))

    async def search(self, request: SearchRequest) -> SearchResult:
        timer = StageTimer()
        limit = max(request.k, self._candidate_k)
        with timer.stage("embed"):
            vectors = await self._kb.embed_queries(self._shape.dense_texts(request))
        if vectors is None:
            with timer.stage("sparse"):
                scored = await self._kb.search_sparse(self._shape.sparse_query(request), limit)
            return ranked_result(
                self.name,
                scored,
                request.k,
                timer.finish(),
                candidate_k=self._candidate_k,
                fallback_reason=SPARSE_ONLY,
                leg="bm25",
            )
        with timer.stage("dense"):
            scored = await self._kb.search_dense(self._shape.dense_vector(vectors), limit)
        return ranked_result(self.name, scored, request.k, timer.finish(), candidate_k=self._candidate_k, leg="dense")

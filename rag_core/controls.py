"""The operator's retrieval controls: one validated model, read from settings, an agent definition or a
search request (each overriding the one before, field by field).

Every field is applied by ``rag_core.controlled.ControlledSearch`` around whichever strategy runs, so
the admin search endpoint, the console's retrieval test and every turn use them the same way.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SelectionStrategy = Literal["top_k", "mmr"]
RerankerKind = Literal["none", "fastembed", "http"]

CONTROL_FIELDS = (
    "relevance_threshold", "selection_strategy", "mmr_lambda", "max_results", "max_context_tokens",
    "recency_boost", "recency_half_life_days", "reranker", "rerank_top_n", "final_top_k", "semantic_cache",
    "similarity_threshold", "multi_query", "query_reformulation", "crag_confidence_threshold",
    "adaptive_routing", "adjacent_chunk_range", "adjacent_chunk_merge",
)


class RetrievalControls(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # A result whose calibrated score (0-1) is below this is dropped; the trace says when that empties the list.
    relevance_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    selection_strategy: SelectionStrategy = "top_k"
    mmr_lambda: float = Field(default=0.7, ge=0.0, le=1.0)  # 1: relevance only, 0: diversity only
    max_results: int | None = Field(default=None, ge=1, le=50)  # a cap on the results, after everything else
    max_context_tokens: int | None = Field(default=None, ge=1, le=200_000)  # the injected text, cut at topics
    recency_boost: float = Field(default=0.0, ge=0.0, le=0.5)  # added to a just-updated topic's score
    recency_half_life_days: float = Field(default=180.0, gt=0.0, le=36_500.0)
    reranker: RerankerKind = "none"
    rerank_top_n: int = Field(default=20, ge=1, le=100)  # candidates given to the reranker
    final_top_k: int | None = Field(default=None, ge=1, le=50)  # kept after reranking (default: the request's k)
    semantic_cache: bool = True
    similarity_threshold: float = Field(default=0.95, ge=0.5, le=1.0)
    multi_query: bool = False
    query_reformulation: bool = False
    crag_confidence_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    adaptive_routing: bool = False
    adjacent_chunk_range: int = Field(default=0, ge=0, le=5)
    adjacent_chunk_merge: bool = False

    def merged(self, overrides: dict[str, Any] | None) -> RetrievalControls:
        """These controls with ``overrides`` (fields left out or None keep their value here) applied,
        validated as a whole: a bad value raises pydantic's ValidationError naming the field."""
        if not overrides:
            return self
        given = {k: v for k, v in overrides.items() if v is not None}
        return RetrievalControls.model_validate({**self.model_dump(), **given})

    def fingerprint(self) -> str:
        """What decides a result (the cache's own settings left out): part of a semantic-cache scope."""
        return self.model_dump_json(exclude={"semantic_cache", "similarity_threshold"})

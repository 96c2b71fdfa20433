"""The retrieval controls (``rag_core.controls``) applied around any strategy, in one order:

route -> reformulate -> search (one query, or several fused by RRF) -> rerank -> recency -> corrective retry
-> relevance threshold -> select (top_k or MMR) -> result caps -> adjacent chunks -> context-token cap.

Each step that changes anything says so in ``SearchResult.notes`` and lists what it removed in
``SearchResult.left_out``; a step whose backend fails (reranker, query LLM) is skipped with a note, never
failing the search.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol

from rag_core.adjacent import widen
from rag_core.calibration import calibrated_score
from rag_core.controls import RetrievalControls
from rag_core.errors import SwitchboardError
from rag_core.generation import StructuredGenerator
from rag_core.kb_group import KnowledgeBaseGroup
from rag_core.knowledge_base import KnowledgeBase
from rag_core.mmr import mmr_select
from rag_core.query_rewrite import paraphrases, standalone_query
from rag_core.query_shape import QueryShape
from rag_core.query_variants import broader, route, variants
from rag_core.rag_context import format_rag
from rag_core.retrieval import Candidate, Hit, RetrievalStrategy, SearchRequest, SearchResult
from rag_core.timing import StageTimer
from rag_core.tokens import estimate_tokens
from rag_core.topic import Topic

log = logging.getLogger(__name__)

ROUTABLE = frozenset({"hybrid"})  # adaptive routing replaces only the default non-LLM strategy
RRF_K = 60
MIN_POOL = 20
# MMR picks k among the best max(2k, 5) results (LangChain's fetch_k idea), not among the whole tail.
MMR_FETCH_FACTOR, MMR_MIN_FETCH = 2, 5  # results searched before threshold / MMR / caps choose among them


class RerankedItem(Protocol):
    index: int
    score: float


class Reranker(Protocol):
    name: str

    async def rerank(self, query: str, documents: list[str], top_n: int) -> Sequence[RerankedItem]: ...


# A reranker by kind, or None; async because building one may load (or download) a model.
Rerankers = Callable[[str], Awaitable[Reranker | None]]
Fetch = Callable[[Sequence[str]], Awaitable[list[Topic]]]


def rerank_text(topic: Topic) -> str:
    return "\n".join([topic.title, topic.summary, *topic.facts])[:4000]


class ControlledSearch:
    def __init__(
        self,
        strategies: Mapping[str, RetrievalStrategy],
        knowledge_base: KnowledgeBase | KnowledgeBaseGroup,
        *,
        generator: StructuredGenerator | None = None,
        rerankers: Rerankers | None = None,
        rerank_timeout_s: float = 5.0,
        shape: QueryShape | None = None,
    ) -> None:
        self._strategies = strategies
        self._kb = knowledge_base
        self._generator = generator
        self._rerankers = rerankers
        self._rerank_timeout_s = rerank_timeout_s
        self._shape = shape or QueryShape()

    async def search(self, name: str, request: SearchRequest, controls: RetrievalControls) -> SearchResult:
        timer = StageTimer()
        notes: list[str] = []
        left_out: dict[str, list[str]] = {}
        out_k = controls.final_top_k or request.k
        if controls.adaptive_routing and name in ROUTABLE:
            routed = route(request.query)
            if routed != name:
                notes.append(f"adaptive routing: {routed} for this query")
                name = routed
        if controls.query_reformulation and request.history:
            with timer.stage("reformulate"):
                rewritten = await standalone_query(self._generator, request) if self._generator else None
            if rewritten is None:
                notes.append("query reformulation skipped: " + ("no language model" if not self._generator
                                                                 else "the model's answer was unusable"))
            else:
                notes.append(f"query reformulated: {rewritten!r}")
                request = request.model_copy(update={"query": rewritten, "history": []})
        depth = max(out_k, MIN_POOL, controls.rerank_top_n if controls.reranker != "none" else 0)
        with timer.stage("search"):
            result, queries = await self._search(name, request.model_copy(update={"k": depth}), controls, notes)
        hits = list(result.hits)
        if controls.reranker != "none":
            with timer.stage("rerank"):
                hits = await self._rerank(controls, request.query, hits, out_k, notes, left_out)
        if controls.recency_boost:
            hits = _recency(hits, controls)
        if controls.crag_confidence_threshold is not None:
            with timer.stage("corrective"):
                hits = await self._corrective(name, request, controls, hits, depth, notes, left_out)
        if controls.relevance_threshold is not None:
            kept = [h for h in hits if h.score >= controls.relevance_threshold]
            removed = [h.topic.source for h in hits if h.score < controls.relevance_threshold]
            if removed:
                left_out["relevance_threshold"] = removed
                if not kept:
                    notes.append(
                        f"relevance threshold {controls.relevance_threshold} removed all {len(removed)} results "
                        f"(best score {max(h.score for h in hits):.3f}): the prompt says 'No additional information'"
                    )
            hits = kept
        if controls.selection_strategy == "mmr" and len(hits) > 1:
            with timer.stage("mmr"):
                hits = await self._mmr(request, hits, out_k, controls, notes)
        cap = min(out_k, controls.max_results or out_k)
        hits = hits[:cap]
        if controls.adjacent_chunk_range:
            with timer.stage("adjacent"):
                hits = await widen(hits, controls.adjacent_chunk_range, controls.adjacent_chunk_merge, self._fetch)
        if controls.max_context_tokens is not None:
            hits = _token_cap(hits, controls.max_context_tokens, notes, left_out)
        timings = {**{f"strategy_{k}": v for k, v in result.timings_ms.items() if k != "total"}, **timer.finish()}
        return result.model_copy(update={
            "strategy": result.strategy, "hits": hits, "timings_ms": timings, "notes": [*result.notes, *notes],
            "left_out": left_out, "queries": queries,
        })

    async def _fetch(self, sources: Sequence[str]) -> list[Topic]:
        return await self._kb.get_many(sources)

    async def _search(
        self, name: str, request: SearchRequest, controls: RetrievalControls, notes: list[str]
    ) -> tuple[SearchResult, list[str]]:
        strategy = self._strategies[name]
        if not controls.multi_query:
            return await strategy.search(request), []
        requests = variants(request)
        if self._generator is not None:
            more = await paraphrases(self._generator, request)
            if more is None:
                notes.append("multi-query: the model's variants were unusable; used rule-based variants")
            else:
                requests = [request, *(request.model_copy(update={"query": q, "history": []}) for q in more)]
        results = await asyncio.gather(*(strategy.search(r) for r in requests))
        return fuse(results, request.k), [r.query for r in requests]

    async def _rerank(
        self, controls: RetrievalControls, query: str, hits: list[Hit], out_k: int, notes: list[str],
        left_out: dict[str, list[str]],
    ) -> list[Hit]:
        reranker = await self._rerankers(controls.reranker) if self._rerankers else None
        if reranker is None:
            notes.append(f"reranker {controls.reranker!r} is not configured: kept the fused order")
            return hits
        pool = hits[: controls.rerank_top_n]
        if not pool:
            return hits
        try:
            ranked = await asyncio.wait_for(
                reranker.rerank(query, [rerank_text(h.topic) for h in pool], out_k), self._rerank_timeout_s)
        except (SwitchboardError, TimeoutError) as exc:
            reason = str(exc) or f"no answer within {self._rerank_timeout_s} s"
            log.warning("reranker %s failed, kept the fused order: %s", reranker.name, reason)
            notes.append(f"reranker {reranker.name} failed ({reason}): kept the fused order")
            return hits
        out = []
        for item in ranked[:out_k]:
            hit = pool[item.index]
            legs = {**hit.legs, "rerank": round(float(item.score), 6)}
            out.append(hit.model_copy(update={"score": calibrated_score(legs), "legs": legs}))
        chosen = {h.topic.source for h in out}
        dropped = [h.topic.source for h in pool if h.topic.source not in chosen]
        if dropped:
            left_out["reranker"] = dropped
        notes.append(f"reranked {len(pool)} candidates with {reranker.name}")
        return out

    async def _corrective(
        self, name: str, request: SearchRequest, controls: RetrievalControls, hits: list[Hit], depth: int,
        notes: list[str], left_out: dict[str, list[str]],
    ) -> list[Hit]:
        threshold = controls.crag_confidence_threshold or 0.0
        best = hits[0].score if hits else 0.0
        if best >= threshold:
            return hits
        retry = broader(request).model_copy(update={"k": depth})
        second = (await self._strategies[name].search(retry)).hits
        second_best = second[0].score if second else 0.0
        if second_best >= threshold:
            notes.append(f"corrective retrieval: best score {best:.3f} < {threshold}; "
                         f"the broader query {retry.query!r} scored {second_best:.3f}")
            return list(second)
        notes.append(f"corrective retrieval: best score {best:.3f} and {second_best:.3f} with a broader query "
                     f"are below {threshold}: answering with 'No additional information'")
        left_out["crag_confidence_threshold"] = [h.topic.source for h in hits]
        return []

    async def _mmr(
        self, request: SearchRequest, hits: list[Hit], k: int, controls: RetrievalControls, notes: list[str]
    ) -> list[Hit]:
        hits = hits[: max(MMR_FETCH_FACTOR * k, MMR_MIN_FETCH)]
        vectors = await self._kb.dense_vectors([h.topic.source for h in hits])
        embedded = await self._kb.embed_queries(self._shape.dense_texts(request)) if vectors else None
        if not vectors or embedded is None:
            notes.append("mmr needs dense vectors and this knowledge base has none: kept the top results")
            return hits
        return mmr_select(hits, vectors, self._shape.dense_vector(embedded), k, controls.mmr_lambda)


def fuse(results: Sequence[SearchResult], k: int) -> SearchResult:
    """Reciprocal-rank fusion of several searches' hits; each topic keeps its best calibrated score."""
    rrf: dict[str, float] = {}
    best: dict[str, Hit] = {}
    for result in results:
        for rank, hit in enumerate(result.hits, start=1):
            source = hit.topic.source
            rrf[source] = rrf.get(source, 0.0) + 1.0 / (RRF_K + rank)
            if source not in best or hit.score > best[source].score:
                best[source] = hit
    order = sorted(rrf, key=lambda s: (-rrf[s], s))[:k]
    first = results[0]
    timings: dict[str, float] = {}
    for result in results:
        for stage, ms in result.timings_ms.items():
            timings[stage] = round(timings.get(stage, 0.0) + ms, 3)
    return first.model_copy(update={
        "hits": [best[s] for s in order],
        "candidates": [Candidate(source=s, score=best[s].score) for s in order],
        "timings_ms": timings,
        "fell_back": any(r.fell_back for r in results),
    })


def _recency(hits: list[Hit], controls: RetrievalControls) -> list[Hit]:
    now = datetime.now(UTC)
    boosted = []
    for hit in hits:
        age_days = max((now - hit.topic.updated_at).total_seconds() / 86400.0, 0.0)
        bonus = controls.recency_boost * math.pow(0.5, age_days / controls.recency_half_life_days)
        boosted.append(hit.model_copy(update={"score": round(min(1.0, hit.score + bonus), 6)}))
    return sorted(boosted, key=lambda h: -h.score)


def _token_cap(hits: list[Hit], budget: int, notes: list[str], left_out: dict[str, list[str]]) -> list[Hit]:
    kept: list[Hit] = []
    used = 0
    for hit in hits:
        cost = estimate_tokens(format_rag([hit.topic]))
        if used + cost > budget:
            break
        kept.append(hit)
        used += cost
    if len(kept) < len(hits):
        left_out["max_context_tokens"] = [h.topic.source for h in hits[len(kept):]]
        notes.append(f"max_context_tokens {budget}: kept {len(kept)} of {len(hits)} results ({used} tokens)")
    return kept

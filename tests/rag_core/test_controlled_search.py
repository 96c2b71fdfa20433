"""The retrieval controls around a real strategy on a real (in-memory) knowledge base with the MiniLM
model: calibrated scores, threshold, MMR, caps, reranking and its fallback, query shaping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rag_core.controlled import ControlledSearch
from rag_core.controls import RetrievalControls
from rag_core.query_variants import route
from rag_core.rerankers import HttpReranker
from rag_core.retrieval import ChatTurn, SearchRequest, StrategyContext
from rag_core.strategies import build_strategies
from rag_core.topic import Topic
from tests.rag_core.conftest import SMALL_KB


def controlled(kb, rerankers=None, generator=None) -> ControlledSearch:
    return ControlledSearch(build_strategies(StrategyContext(kb, generator)), kb, generator=generator,
                            rerankers=rerankers, rerank_timeout_s=1.0)


async def run(search: ControlledSearch, query: str, k: int = 3, strategy: str = "hybrid", **controls):
    return await search.search(strategy, SearchRequest(query=query, k=k), RetrievalControls(**controls))


@pytest.fixture
async def kb(make_kb):
    base = make_kb("fastembed")
    await base.upsert_many(SMALL_KB)
    return base


async def test_scores_are_calibrated_probabilities_with_each_legs_raw_score(kb):
    result = await run(controlled(kb), "how much does parking cost per hour", k=5)
    best, *rest = result.hits
    assert best.topic.source == "parking"
    assert set(best.legs) == {"bm25", "dense", "fused"} and best.legs["bm25"] > 1.0  # raw BM25 is not 0-1
    assert all(0.0 <= h.score <= 1.0 for h in result.hits)
    assert best.score > 0.5 > rest[-1].score  # the answer is likely right, the fifth result likely not
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)


async def test_a_threshold_that_removes_everything_says_so(kb):
    result = await run(controlled(kb), "how much does parking cost per hour", relevance_threshold=0.999)
    assert result.hits == []
    assert "parking" in result.left_out["relevance_threshold"]
    assert any("removed all" in note and "No additional information" in note for note in result.notes)
    kept = await run(controlled(kb), "how much does parking cost per hour", relevance_threshold=0.5)
    assert [h.topic.source for h in kept.hits] == ["parking"] and "relevance_threshold" in kept.left_out


async def test_mmr_picks_a_different_relevant_topic_over_near_duplicates(make_kb):
    base = make_kb("fastembed")
    copies = [Topic(source=f"parking-{i}", title="Parking garage prices",
                    summary="Parking in our garage costs $3 per hour") for i in range(3)]
    others = [
        Topic(source="times", title="Parking garage opening times",
              summary="The parking garage is open around the clock; pay at the machines by the exit."),
        Topic(source="pass", title="Monthly parking passes",
              summary="A monthly garage parking pass costs $60 instead of paying per hour."),
        Topic(source="disabled", title="Parking for disabled visitors",
              summary="Disabled visitors park free on level 1 of the garage."),
    ]
    await base.upsert_many([*copies, *others, *SMALL_KB[:3]])
    search = controlled(base)
    top = await run(search, "parking garage price per hour", k=2)
    assert all(h.topic.source.startswith("parking-") for h in top.hits)  # relevance alone: two copies
    diverse = await run(search, "parking garage price per hour", k=2, selection_strategy="mmr", mmr_lambda=0.5)
    assert diverse.hits[0].topic.source == top.hits[0].topic.source
    assert diverse.hits[1].topic.source in {"times", "pass", "disabled"}


async def test_context_tokens_are_capped_at_topic_boundaries(kb):
    full = await run(controlled(kb), "parking dogs bicycles", k=3)
    assert len(full.hits) == 3
    capped = await run(controlled(kb), "parking dogs bicycles", k=3, max_context_tokens=40)
    assert 1 <= len(capped.hits) < 3 and capped.hits == full.hits[: len(capped.hits)]
    assert capped.left_out["max_context_tokens"] == [h.topic.source for h in full.hits[len(capped.hits):]]
    assert (await run(controlled(kb), "parking dogs bicycles", k=3, max_results=1)).hits == full.hits[:1]


async def test_the_http_reranker_reorders_and_its_failure_keeps_the_fused_order(kb, rerank_server):
    reranker = HttpReranker(rerank_server.url, api_key="rk-secret", timeout_s=0.5)

    async def rerankers(kind: str) -> HttpReranker | None:
        return reranker if kind == "http" else None

    search = controlled(kb, rerankers=rerankers)
    fused = await run(search, "rent a bicycle helmet", k=2)
    reranked = await run(search, "rent a bicycle helmet", k=2, reranker="http", rerank_top_n=5)
    sent = rerank_server.received[-1]
    assert sent.query == "rent a bicycle helmet" and len(sent.documents) == 5 and sent.top_n == 2
    assert sent.authorization == "Bearer rk-secret"
    assert all("rerank" in h.legs and h.score == h.legs["rerank"] for h in reranked.hits)
    assert reranked.hits[0].topic.source == "bikes" and any("reranked 5" in n for n in reranked.notes)
    rerank_server.mode = "http_500"
    fallback = await run(search, "rent a bicycle helmet", k=2, reranker="http")
    assert [h.topic.source for h in fallback.hits] == [h.topic.source for h in fused.hits]
    assert any("failed" in n and "fused order" in n for n in fallback.notes)
    assert not any("rk-secret" in n for n in fallback.notes)
    rerank_server.mode = "slow"
    slow = await run(search, "rent a bicycle helmet", k=2, reranker="http")
    assert [h.topic.source for h in slow.hits] == [h.topic.source for h in fused.hits]


async def test_an_unconfigured_reranker_is_noted_not_fatal(kb):
    result = await run(controlled(kb), "parking", reranker="fastembed")
    assert result.hits and any("not configured" in n for n in result.notes)


async def test_multi_query_without_a_model_searches_rule_based_variants(kb):
    search = controlled(kb)
    request = SearchRequest(query="what does it cost to park?", history=[ChatTurn(text="I bring my dog")], k=3)
    result = await search.search("hybrid", request, RetrievalControls(multi_query=True))
    assert result.queries[0] == "what does it cost to park?" and len(result.queries) == 3
    assert "park" in result.queries[2] and "what" not in result.queries[2].split()
    assert result.hits[0].topic.source == "parking"


def test_adaptive_routing_rules():
    assert route("where is order A1234-X?") == "bm25"
    assert route('what does "ERR_CONN" mean') == "bm25"
    assert route("how do I keep my dog calm in the store") == "dense"
    assert route("parking") == "hybrid"


async def test_adaptive_routing_and_corrective_retrieval_say_what_they_did(kb):
    routed = await run(controlled(kb), "gift card G5000 balance", adaptive_routing=True)
    assert routed.strategy == "bm25" and any("adaptive routing: bm25" in n for n in routed.notes)
    hopeless = await run(controlled(kb), "quantum chromodynamics lattice", crag_confidence_threshold=0.9)
    assert hopeless.hits == [] and any("No additional information" in n for n in hopeless.notes)
    assert hopeless.left_out["crag_confidence_threshold"]


async def test_recency_boost_lifts_a_newer_topic_among_equals(make_kb):
    base = make_kb("fastembed")
    old = datetime.now(UTC) - timedelta(days=3 * 365)
    await base.upsert_many([
        Topic(source="a-old", title="Returns", summary="Return items within 30 days.", updated_at=old),
        Topic(source="b-new", title="Returns", summary="Return items within 30 days.", updated_at=datetime.now(UTC)),
    ])
    search = controlled(base)
    plain = await run(search, "how do returns work", k=2)
    assert plain.hits[0].score == plain.hits[1].score
    boosted = await run(search, "how do returns work", k=2, recency_boost=0.1)
    assert boosted.hits[0].topic.source == "b-new" and boosted.hits[0].score > boosted.hits[1].score

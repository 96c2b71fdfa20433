"""One contract, every registered strategy, with and without the dense model."""

from __future__ import annotations

import pytest

from rag_core import STRATEGIES, ChatTurn, KnowledgeBase, SearchRequest, StrategyContext, build_strategy
from tests.rag_core.conftest import OverlapSearchLlm


def strategy_for(name: str, kb: KnowledgeBase):
    return build_strategy(name, StrategyContext(kb, OverlapSearchLlm()))


@pytest.fixture(params=sorted(STRATEGIES))
def strategy_name(request) -> str:
    return request.param


async def test_finds_the_obviously_right_topic(small_kb, strategy_name):
    result = await strategy_for(strategy_name, small_kb).search(
        SearchRequest(query="Can I bring my dog into the store?", k=3)
    )
    assert result.strategy == strategy_name
    assert result.hits[0].topic.source == "pets"
    assert not result.fell_back or not small_kb.dense_enabled
    assert result.timings_ms["total"] > 0


async def test_respects_k(small_kb, strategy_name):
    strategy = strategy_for(strategy_name, small_kb)
    for k in (1, 2):
        result = await strategy.search(SearchRequest(query="gift cards and parking and refunds", k=k))
        assert 1 <= len(result.hits) <= k


async def test_history_decides_an_ambiguous_follow_up(small_kb, strategy_name):
    strategy = strategy_for(strategy_name, small_kb)
    history = [
        ChatTurn(role="user", text="I am driving over, is there a parking garage?"),
        ChatTurn(role="agent", text="Yes, there is one under the building."),
    ]
    result = await strategy.search(SearchRequest(query="How much does it cost per hour?", history=history, k=3))
    assert result.hits[0].topic.source == "parking"


async def test_only_rag_context_topics_are_retrieved(small_kb, strategy_name):
    result = await strategy_for(strategy_name, small_kb).search(
        SearchRequest(query="staff rota notes for dogs and parking", k=10)
    )
    assert "internal-notes" not in {hit.topic.source for hit in result.hits}


async def test_empty_knowledge_base_gives_no_hits(make_kb, encoder_kind, strategy_name):
    kb = make_kb(encoder_kind)
    result = await strategy_for(strategy_name, kb).search(SearchRequest(query="opening hours?", k=3))
    assert result.hits == []

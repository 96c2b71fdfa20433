"""llm_select and hybrid_llm: the seed's prompt, id handling and fallback to hybrid."""

from __future__ import annotations

from datetime import UTC, datetime

from rag_core import (
    ChatTurn,
    SearchRequest,
    StrategyContext,
    StructuredOutputError,
    Topic,
    build_strategy,
    estimate_tokens,
)
from rag_core.search_prompt import SEARCH_RESULT_SCHEMA
from rag_core.strategies import LlmSelectStrategy
from rag_core.strategies.llm_select import SELECTED_NOTHING
from tests.rag_core.conftest import SMALL_KB, ScriptedSearchLlm, answer

THREE = [
    Topic(source="a1", title="Old prices", facts=["Coffee $2"], updated_at=datetime(2024, 1, 1, tzinfo=UTC)),
    Topic(source="a3", title="New prices", facts=["Coffee $3", "Tea $2"], updated_at=datetime(2024, 3, 1, tzinfo=UTC)),
    Topic(source="a2", title="Hours", facts=[], updated_at=datetime(2024, 2, 1, 8, 30, tzinfo=UTC)),
]

EXPECTED_PROMPT = """You are the search assistant.
**Task:**
Find the 1-3 articles from <KnowledgeBaseArticles> that are the best
semantic match for the user's topics in the **entire** <ConversationHistory>.
**CRITICAL RULES:**
1. Matches for the **last user message** are the most important and
MUST be listed first.
2. If multiple articles cover the same topic, select only the most
recent one (check `article_last_updated`).
3. Provide up to three relevant article IDs.
<ConversationMeta>
name: Ana; intent: pricing
</ConversationMeta>
<ConversationHistory>
User: hi
Agent: Hello! How can I help?
User: how much is a coffee?
</ConversationHistory>
<KnowledgeBaseArticles>
article_title: New prices
article_facts: [Coffee $3, Tea $2]
article_last_updated: 2024-03-01T00:00:00+00:00
article_id: a3

---

article_title: Hours
article_facts: []
article_last_updated: 2024-02-01T08:30:00+00:00
article_id: a2

---

article_title: Old prices
article_facts: [Coffee $2]
article_last_updated: 2024-01-01T00:00:00+00:00
article_id: a1

---


</KnowledgeBaseArticles>
"""

REQUEST = SearchRequest(
    query="how much is a coffee?",
    history=[ChatTurn(role="user", text="hi"), ChatTurn(role="agent", text="Hello! How can I help?")],
    conversation_meta="name: Ana; intent: pricing",
    k=3,
)


async def test_prompt_lists_pool_newest_first_in_seed_format(make_kb):
    kb = make_kb("none")
    await kb.upsert_many(THREE)
    llm = ScriptedSearchLlm(answer("a3"))
    result = await LlmSelectStrategy(kb, llm).search(REQUEST)
    assert llm.prompts == [EXPECTED_PROMPT]
    assert llm.schemas == [SEARCH_RESULT_SCHEMA]
    assert result.prompt_tokens == estimate_tokens(EXPECTED_PROMPT)
    assert [hit.topic.source for hit in result.hits] == ["a3"]
    assert not result.fell_back


async def test_history_keeps_the_last_20_messages(make_kb):
    kb = make_kb("none")
    await kb.upsert_many(THREE)
    llm = ScriptedSearchLlm(answer())
    history = [ChatTurn(role="user", text=f"message {i}") for i in range(30)]
    await LlmSelectStrategy(kb, llm).search(SearchRequest(query="last", history=history))
    lines = llm.prompts[0].split("<ConversationHistory>\n")[1].split("\n</ConversationHistory>")[0].splitlines()
    assert lines == [f"User: message {i}" for i in range(11, 30)] + ["User: last"]


async def test_unknown_duplicate_and_non_pool_ids_are_dropped(make_kb):
    kb = make_kb("none")
    await kb.upsert_many(SMALL_KB)
    llm = ScriptedSearchLlm(answer("parking", "no-such-topic", "parking"), answer("internal-notes", "pets"))
    strategy = LlmSelectStrategy(kb, llm)
    first = await strategy.search(SearchRequest(query="parking?"))
    assert [hit.topic.source for hit in first.hits] == ["parking"]
    second = await strategy.search(SearchRequest(query="dogs?"))
    assert [hit.topic.source for hit in second.hits] == ["pets"]
    assert "internal-notes" not in llm.prompts[0]


async def test_a_valid_answer_that_selects_nothing_falls_back_to_the_hybrid_ranking(make_kb):
    kb = make_kb("none")
    await kb.upsert_many(SMALL_KB)
    for name in ("llm_select", "hybrid_llm"):
        llm = ScriptedSearchLlm(answer(), answer("no-such-topic"))
        strategy = build_strategy(name, StrategyContext(kb, llm))
        hybrid = await build_strategy("hybrid", StrategyContext(kb)).search(SearchRequest(query="Can I bring my dog?"))
        for _ in range(2):  # all "none"; only an id it invented
            result = await strategy.search(SearchRequest(query="Can I bring my dog?"))
            assert [h.topic.source for h in result.hits] == [h.topic.source for h in hybrid.hits]
            assert result.hits[0].topic.source == "pets"
            assert result.fell_back and result.fallback_reason == SELECTED_NOTHING


async def test_invalid_output_falls_back_to_hybrid(make_kb, encoder_kind):
    kb = make_kb(encoder_kind)
    await kb.upsert_many(SMALL_KB)
    bad_answers = [
        StructuredOutputError("schema mismatch after retry"),
        {"search_result": {"article_id_1": "pets"}},
        {"results": ["pets"]},
        {"search_result": {"article_id_1": 7, "article_id_2": "none", "article_id_3": "none"}},
    ]
    for name in ("llm_select", "hybrid_llm"):
        llm = ScriptedSearchLlm(*bad_answers)
        strategy = build_strategy(name, StrategyContext(kb, llm))
        for _ in bad_answers:
            result = await strategy.search(SearchRequest(query="Can I bring my dog?", k=2))
            assert result.strategy == name
            assert result.fell_back and result.fallback_reason
            assert result.hits[0].topic.source == "pets"
            assert len(result.hits) <= 2
            assert result.prompt_tokens and result.prompt_tokens > 0
        assert "StructuredOutputError" in result.fallback_reason


async def test_without_a_generator_llm_strategies_answer_from_hybrid(make_kb):
    kb = make_kb("none")
    await kb.upsert_many(SMALL_KB)
    result = await build_strategy("llm_select", StrategyContext(kb)).search(SearchRequest(query="dogs allowed?"))
    assert result.fell_back and result.fallback_reason == "no structured generator configured"
    assert result.hits[0].topic.source == "pets"


async def test_hybrid_llm_lists_only_the_prefiltered_candidates(make_kb):
    kb = make_kb("none")
    await kb.upsert_many(SMALL_KB)
    full, narrow = ScriptedSearchLlm(answer("gift-cards")), ScriptedSearchLlm(answer("gift-cards", "hours"))
    request = SearchRequest(query="gift card for a bicycle")
    llm_select = await build_strategy("llm_select", StrategyContext(kb, full)).search(request)
    hybrid_llm = await build_strategy(
        "hybrid_llm", StrategyContext(kb, narrow, {"hybrid_llm": {"candidate_k": 2}})
    ).search(SearchRequest(query="gift card for a bicycle"))
    assert full.prompts[0].count("article_id: ") == 7
    assert narrow.prompts[0].count("article_id: ") == 2
    assert "article_id: gift-cards" in narrow.prompts[0]
    # "hours" was not among the candidates, so the LLM cannot inject it.
    assert [hit.topic.source for hit in hybrid_llm.hits] == ["gift-cards"]
    assert hybrid_llm.prompt_tokens < llm_select.prompt_tokens

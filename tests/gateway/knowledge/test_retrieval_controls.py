"""Retrieval controls and the semantic cache through the production search path (``Knowledge.search``),
in real turns, with the MiniLM model, real Redis and the fake LLM."""

from __future__ import annotations

import numpy as np
import pytest
from redis.asyncio import Redis

from gateway.core.metrics import Metrics
from gateway.knowledge.search import Knowledge
from gateway.knowledge.semantic_cache import SemanticCache
from gateway.services import Services
from rag_core.retrieval import SearchResult
from rag_core.topic import Topic
from tests.gateway.knowledge.test_rag_turns import TOPICS, inbound, selection
from tests.rag_core.conftest import MODEL_PATH
from tests.sinks import RecordingSink as Sink


def dense(settings, **more):
    return settings.model_copy(update={"embeddings": "fastembed", "embedding_model_path": MODEL_PATH, **more})


@pytest.fixture
async def make_services(settings):
    built: list[Services] = []

    async def make(**overrides) -> Services:
        services = Services.build(dense(settings, rag_top_k=3, **overrides))
        await services.knowledge.kb.upsert_many(TOPICS)
        await services.start()
        built.append(services)
        return services

    yield make
    for services in built:
        await services.aclose()


async def test_a_threshold_that_removes_everything_gives_the_placeholder_and_says_so(make_services, fake_openai):
    services = await make_services(relevance_threshold=0.99)
    fake_openai.script_json(selection("rent"))
    outcome = await services.pipeline.handle(inbound("How much is an e-bike?"), Sink())
    reply = fake_openai.chat_requests()[-1]
    assert "No additional information" in reply["body"]["messages"][0]["content"]
    retrieval = outcome.turn.trace.retrieval
    assert retrieval.selected == [] and "rent" in retrieval.left_out["relevance_threshold"]
    assert any("removed all" in note for note in retrieval.notes)


async def test_a_cache_hit_skips_the_search_llm_and_is_in_the_trace(make_services, fake_openai):
    services = await make_services()
    fake_openai.script_json(selection("rent"))
    first = await services.pipeline.handle(inbound("How much is an e-bike?", identity="test:a"), Sink())
    assert first.turn.trace.retrieval.cache == "miss" and len(fake_openai.chat_requests()) == 2
    second = await services.pipeline.handle(inbound("How much is an e-bike?", identity="test:b"), Sink())
    assert len(fake_openai.chat_requests()) == 3  # the reply only: no search-LLM call
    retrieval = second.turn.trace.retrieval
    assert retrieval.cache == "hit" and retrieval.selected == ["rent"]
    assert "E-bikes cost 35 euros" in fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]
    stats = await services.knowledge.cache.stats()
    assert stats["hit"] == 1 and stats["miss"] == 1 and stats["entries"] == 1


async def test_an_edited_or_deleted_topic_is_never_served_from_the_cache(make_services):
    services = await make_services()
    knowledge = services.knowledge
    first = await knowledge.search("How much is an e-bike?", strategy="hybrid")
    assert first.cache == "miss" and first.hits[0].topic.source == "rent"
    assert (await knowledge.search("How much is an e-bike?", strategy="hybrid")).cache == "hit"
    edited = Topic(source="rent", title="E-bike rental prices", summary="E-bikes now cost 40 euros per day.")
    await knowledge.kb.upsert(edited)
    after_edit = await knowledge.search("How much is an e-bike?", strategy="hybrid")
    assert after_edit.cache == "miss" and after_edit.hits[0].topic.summary == "E-bikes now cost 40 euros per day."
    assert (await knowledge.cache.stats())["stale"] == 0  # the write count moved the scope: never looked up
    assert (await knowledge.search("How much is an e-bike?", strategy="hybrid")).cache == "hit"
    await knowledge.kb.delete("rent")
    after_delete = await knowledge.search("How much is an e-bike?", strategy="hybrid")
    assert after_delete.cache == "miss" and "rent" not in [h.topic.source for h in after_delete.hits]


async def test_a_paraphrase_hits_and_a_different_question_or_control_misses(make_services):
    services = await make_services(similarity_threshold=0.9)
    knowledge = services.knowledge
    await knowledge.search("How much is an e-bike?", strategy="hybrid")
    paraphrase = await knowledge.search("how much is an e-bike", strategy="hybrid")
    assert paraphrase.cache == "hit" and any("semantic cache hit (cosine" in n for n in paraphrase.notes)
    assert (await knowledge.search("When are you open?", strategy="hybrid")).cache == "miss"
    other_controls = await knowledge.search("How much is an e-bike?", strategy="hybrid",
                                            controls={"relevance_threshold": 0.2})
    assert other_controls.cache == "miss"  # another scope: the controls decide the result
    assert (await knowledge.search("How much is an e-bike?", strategy="hybrid",
                                   controls={"semantic_cache": False})).cache == "off"


async def test_the_cache_is_shared_by_replicas_and_cleared_for_all(make_services):
    one, two = await make_services(), await make_services()
    await one.knowledge.search("How much is an e-bike?", strategy="hybrid")
    assert (await two.knowledge.search("How much is an e-bike?", strategy="hybrid")).cache == "hit"
    assert await two.knowledge.cache.clear() == 1
    assert (await one.knowledge.search("How much is an e-bike?", strategy="hybrid")).cache == "miss"


async def test_a_cache_whose_redis_is_down_is_skipped_and_counted(settings):
    dead = Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    metrics = Metrics()
    knowledge = Knowledge(dense(settings), None, cache=SemanticCache(dead, "sb:x", ttl_s=60, max_entries=10),
                          metrics=metrics)
    await knowledge.kb.upsert_many(TOPICS)
    result = await knowledge.search("How much is an e-bike?", strategy="hybrid")
    assert result.hits[0].topic.source == "rent" and result.cache == "off"
    assert any("semantic cache off: its Redis failed" in n for n in result.notes)
    assert metrics.semantic_cache.labels("error")._value.get() == 1
    knowledge.close()
    await dead.aclose()



async def test_an_empty_knowledge_base_skips_retrieval_without_embedding(settings):
    knowledge = Knowledge(dense(settings, query_embedding_cache=0), None)
    batching = knowledge.bases.main._dense  # BatchingQueries: it counts the embedding calls it made
    result = await knowledge.search("How much is an e-bike?", strategy="hybrid")
    assert result.hits == [] and result.notes == ["the knowledge base has no topics: retrieval skipped"]
    assert batching.calls == 0
    await knowledge.kb.upsert_many(TOPICS)
    assert (await knowledge.search("How much is an e-bike?", strategy="hybrid")).hits[0].topic.source == "rent"
    assert batching.calls == 1  # with topics it embeds the query
    knowledge.close()


async def test_the_cache_finds_its_entry_among_many_and_forgets_a_dropped_one(redis_url, agent_id):
    redis = Redis.from_url(redis_url)
    cache = SemanticCache(redis, f"sb:{agent_id}", ttl_s=60, max_entries=100)
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(150, 8)).astype(np.float32)  # more than the mirror's first buffer (64 rows)
    for i, vector in enumerate(vectors):
        await cache.store("scope", vector.tolist(), SearchResult(strategy=f"s{i}", hits=[]), {})
    assert (await cache.stats())["entries"] == 100  # the 50 oldest went
    assert (await cache.lookup("scope", vectors[10].tolist(), 0.999)).found is None
    found = (await cache.lookup("scope", vectors[100].tolist(), 0.999)).found
    assert found is not None and found.result.strategy == "s100" and found.similarity > 0.999
    assert (await cache.lookup("other scope", vectors[100].tolist(), 0.999)).found is None
    await cache.invalidate(found.entry_id)
    assert (await cache.lookup("scope", vectors[100].tolist(), 0.999)).found is None
    again = (await cache.lookup("scope", vectors[149].tolist(), 0.999)).found  # rows after the dropped one moved up
    assert again is not None and again.result.strategy == "s149"
    # The same vector stored under another scope, between rows of this one: each scope finds its own entry.
    await cache.store("other scope", vectors[149].tolist(), SearchResult(strategy="other", hits=[]), {})
    await cache.store("scope", (vectors[149] + 0.001).tolist(), SearchResult(strategy="s149b", hits=[]), {})
    other = (await cache.lookup("other scope", vectors[149].tolist(), 0.999)).found
    assert other is not None and other.result.strategy == "other"
    mine = (await cache.lookup("scope", vectors[149].tolist(), 0.999)).found
    assert mine is not None and mine.result.strategy in ("s149", "s149b")
    assert (await cache.lookup("a scope never stored", vectors[149].tolist(), 0.5)).found is None
    await redis.aclose()


async def test_a_hit_costs_one_round_trip_and_its_count_rides_on_the_next_one(redis_url, agent_id):
    """The entry this process stored (or read once) is served without reading it again; the hit and miss
    counts go out with the next lookup's round trip, and ``stats`` sends what is left first."""
    from gateway.core.redis_tally import counting, tallying

    redis = Redis.from_url(redis_url)
    tallying(redis.connection_pool)
    cache = SemanticCache(redis, f"sb:{agent_id}", ttl_s=60, max_entries=100)
    vector = [1.0, 0.0, 0.0, 0.0]
    hits = [{"topic": TOPICS[1].model_dump(), "score": 0.9}]
    await cache.store("scope", vector, SearchResult.model_validate({"strategy": "hybrid", "hits": hits}), {"rent": "d"})
    cache.count("miss")
    for _ in range(2):
        with counting() as tally:
            found = (await cache.lookup("scope", vector, 0.99)).found
        assert found is not None and found.result.hits[0].topic.source == "rent"
        assert tally.round_trips == 1, tally.round_trips  # the sync (new ids, write counts, counts) only
        cache.count("hit")
    found.result.hits.clear()  # what one caller does with its result is not what the next one gets
    again = (await cache.lookup("scope", vector, 0.99)).found
    assert again is not None and len(again.result.hits) == 1
    stats = await cache.stats()
    assert (stats["miss"], stats["hit"]) == (1, 2)
    # Another process (its own mirror, nothing parsed) reads the entry once, then serves it from memory.
    other = SemanticCache(redis, f"sb:{agent_id}", ttl_s=60, max_entries=100)
    with counting() as tally:
        assert (await other.lookup("scope", vector, 0.99)).found is not None
    assert tally.round_trips == 2  # the sync reads the new entry in a second round trip
    assert await other.clear() == 1
    assert (await cache.lookup("scope", vector, 0.99)).found is None  # cleared elsewhere: nothing kept here serves
    await redis.aclose()


async def test_overlapping_lookups_keep_each_entry_once(redis_url, agent_id):
    """Lookups that overlap each sync the mirror: entries this process stored and entries another process
    stored are each taken in by one of them, held once, and found."""
    import asyncio

    redis = Redis.from_url(redis_url)
    here = SemanticCache(redis, f"sb:{agent_id}", ttl_s=60, max_entries=1000)
    elsewhere = SemanticCache(redis, f"sb:{agent_id}", ttl_s=60, max_entries=1000)
    vectors = np.random.default_rng(5).normal(size=(20, 8)).astype(np.float32)
    for i in range(20):
        await (here if i % 2 else elsewhere).store("scope", vectors[i].tolist(),
                                                   SearchResult(strategy=f"s{i}", hits=[]), {})
    found = await asyncio.gather(*(here.lookup("scope", vectors[i].tolist(), 0.999) for i in range(20)))
    assert [f.found.result.strategy if f.found else None for f in found] == [f"s{i}" for i in range(20)]
    assert len(here._mirror.ids) == len(set(here._mirror.ids)) == 20
    await redis.aclose()

"""POST /api/kb/search with retrieval controls, the semantic cache's admin endpoints and metrics, on a live
gateway with the MiniLM model."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer
from tests.rag_core.conftest import MODEL_PATH

ADMIN = {"Authorization": "Bearer admin-secret"}
TOPICS = [
    {"source": "rent", "title": "E-bike rental prices", "summary": "E-bikes cost 35 euros per day."},
    {"source": "hours", "title": "Opening hours", "summary": "We are open from 9 to 5 on weekdays."},
    {"source": "repair", "title": "Repairs", "summary": "A flat tyre repair is 12 euros."},
]


@pytest.fixture
def client(settings) -> Iterator[httpx.Client]:
    dense = settings.model_copy(update={"embeddings": "fastembed", "embedding_model_path": MODEL_PATH})
    with LiveServer(create_app(dense)) as server, httpx.Client(base_url=server.url, headers=ADMIN, timeout=30) as c:
        assert c.post("/api/kb/topics", json=TOPICS).status_code == 201
        yield c


def search(client: httpx.Client, **body) -> dict:
    response = client.post("/api/kb/search", json={"query": "How much is an e-bike?", "strategy": "hybrid", **body})
    assert response.status_code == 200, response.text
    return response.json()


def test_results_carry_a_calibrated_score_leg_scores_timings_and_the_cache_state(client):
    first = search(client)
    best = first["results"][0]
    assert best["source"] == "rent" and 0.5 < best["score"] <= 1.0
    assert set(best["legs"]) == {"bm25", "dense", "fused"} and best["legs"]["bm25"] > 1.0
    assert first["cache"] == "miss" and first["timings_ms"]["total"] > 0
    again = search(client)
    assert again["cache"] == "hit" and again["results"] == first["results"]
    assert search(client, semantic_cache=False)["cache"] == "off"


def test_controls_apply_per_request(client):
    strict = search(client, relevance_threshold=0.99)
    assert strict["results"] == [] and "rent" in strict["left_out"]["relevance_threshold"]
    assert any("removed all" in n for n in strict["notes"])
    capped = search(client, k=3, max_results=1, semantic_cache=False)
    assert [r["source"] for r in capped["results"]] == ["rent"]
    multi = search(client, multi_query=True, semantic_cache=False)
    assert multi["queries"][0] == "How much is an e-bike?" and len(multi["queries"]) >= 2


@pytest.mark.parametrize(("body", "field"), [
    ({"relevance_threshold": 1.5}, "relevance_threshold"),
    ({"relevance_threshold": -0.1}, "relevance_threshold"),
    ({"selection_strategy": "best"}, "selection_strategy"),
    ({"reranker": "magic"}, "reranker"),
    ({"mmr_lambda": 2}, "mmr_lambda"),
    ({"relevance_treshold": 0.4}, "relevance_treshold"),  # a misspelt control is not silently ignored
])
def test_a_bad_control_is_a_422_naming_the_field(client, body, field):
    response = client.post("/api/kb/search", json={"query": "e-bike", **body})
    assert response.status_code == 422
    assert field in response.text


def test_cache_stats_clear_and_metrics(client):
    search(client)
    search(client)
    stats = client.get("/api/kb/cache").json()
    assert stats["enabled"] is True and stats["entries"] == 1 and stats["hit"] == 1 and stats["miss"] == 1
    assert stats["hit_rate"] == 0.5
    metrics = client.get("/metrics").text
    assert 'switchboard_semantic_cache_lookups_total{outcome="hit"} 1.0' in metrics
    assert "switchboard_semantic_cache_entries 1.0" in metrics
    assert client.delete("/api/kb/cache").json() == {"cleared": 1}
    assert client.get("/api/kb/cache").json()["entries"] == 0
    assert search(client)["cache"] == "miss"


def test_a_write_to_the_knowledge_base_makes_older_cache_entries_unusable(client):
    def found(query: str) -> tuple[str, list[str]]:
        answer = search(client, query=query)
        return answer["cache"], [r["source"] for r in answer["results"]]

    word = "zqcache7777"
    assert found(word)[0] == "miss"
    assert found(word)[0] == "hit"  # the empty answer is cached
    topic = {"source": "secret-word", "title": "The zqcache7777 code", "summary": f"{word} opens the back gate."}
    assert client.post("/api/kb/topics", json=topic).status_code in (200, 201)
    cache, sources = found(word)
    assert cache == "miss" and "secret-word" in sources  # not the stale miss
    assert found(word)[0] == "hit"
    other = "zqdoc8888"
    assert found(other)[0] == "miss"
    document = f"# Gate codes\n\nThe side door code is {other}.\n".encode()
    upload = client.post("/api/kb/documents", files=[("file", ("codes.md", document))])
    assert upload.status_code == 201, upload.text
    cache, sources = found(other)
    assert cache == "miss" and any(s.startswith("doc:") for s in sources)
    client.delete("/api/kb/topics/secret-word")
    cache, sources = found(word)  # a delete, too: the hit above is not served
    assert cache == "miss" and "secret-word" not in sources


def test_an_entry_over_the_size_cap_is_not_cached(settings, caplog):
    dense = settings.model_copy(update={"embeddings": "fastembed", "embedding_model_path": MODEL_PATH,
                                        "semantic_cache_max_entry_bytes": 4096})
    long = [{"source": f"long-{i}", "title": f"E-bike notes {i}", "summary": "E-bike rental. " + "x" * 2000}
            for i in range(3)]
    with LiveServer(create_app(dense)) as server, \
            httpx.Client(base_url=server.url, headers=ADMIN, timeout=30) as c:
        assert c.post("/api/kb/topics", json=long).status_code == 201
        answers = [search(c) for _ in range(2)]
        assert [a["cache"] for a in answers] == ["miss", "miss"]  # never stored, so never a hit
        assert "semantic cache: not stored (over its size cap)" in answers[1]["notes"]
        assert c.get("/api/kb/cache").json()["entries"] == 0
    assert "over the 4096-byte cap, not stored" in caplog.text


def test_bypass_cache_as_the_console_offers_it(client):
    first = search(client)
    assert first["cache"] == "miss"
    bypassed = search(client, bypass_cache=True)
    assert bypassed["cache"] == "off" and bypassed["results"] == first["results"]
    assert search(client)["cache"] == "hit"  # bypassing neither used nor dropped the cached entry
    both = client.post("/api/kb/search", json={"query": "e-bike?", "bypass_cache": True, "semantic_cache": True})
    assert both.status_code == 422 and both.json()["message"].startswith("bypass_cache: contradicts")

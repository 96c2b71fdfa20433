"""Knowledge-base admin API on a live gateway: CRUD, import, search, and its refusals."""

from __future__ import annotations

import json

import httpx
import pytest

ADMIN = {"Authorization": "Bearer admin-secret"}
TOPIC = {"source": "hours", "title": "Opening hours", "facts": ["open 9 to 5"],
         "summary": "We are open from 9 to 5 on weekdays."}


@pytest.fixture
def client(gateway):
    with httpx.Client(base_url=gateway.url, timeout=30, headers=ADMIN) as c:
        yield c


def test_admin_token_is_required(gateway):
    assert httpx.get(f"{gateway.url}/api/kb/topics").status_code == 401
    wrong = httpx.get(f"{gateway.url}/api/kb/topics", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json()["error"] == "unauthorized"


def test_topic_crud_round_trip(client):
    created = client.post("/api/kb/topics", json=TOPIC)
    assert created.status_code == 201 and created.json()["created"] == ["hours"]
    again = client.post("/api/kb/topics", json=TOPIC).json()
    assert again["created"] == [] and again["embedded"] == 0  # same content is not re-embedded
    got = client.get("/api/kb/topics/hours").json()
    assert got["title"] == "Opening hours" and got["labels"] == ["rag_context"]
    updated = client.put("/api/kb/topics/hours", json={**TOPIC, "summary": "Now open 8 to 6."}).json()
    assert updated["updated"] == ["hours"]
    listed = client.get("/api/kb/topics").json()
    assert listed["total"] == 1 and listed["topics"][0]["summary"] == "Now open 8 to 6."
    assert client.delete("/api/kb/topics/hours").status_code == 204
    assert client.get("/api/kb/topics/hours").status_code == 404
    assert client.delete("/api/kb/topics/hours").status_code == 404


@pytest.mark.parametrize("missing", ["source", "title"])
def test_a_topic_without_source_or_title_is_422_naming_the_field(client, missing):
    body = {k: v for k, v in TOPIC.items() if k != missing}
    resp = client.post("/api/kb/topics", json=body)
    assert resp.status_code == 422 and resp.json()["message"].startswith(missing)
    assert client.get("/api/kb/topics").json()["total"] == 0


@pytest.mark.parametrize("source", ["two words", "../../etc/passwd", "a/b", "x<script>", "caf\u00e9", "-lead",
                                    "new\nline", "q?x=1", "100%"])
def test_a_topic_source_outside_its_charset_is_422_naming_the_field(client, source):
    resp = client.post("/api/kb/topics", json={**TOPIC, "source": source})
    assert resp.status_code == 422 and resp.json()["message"].startswith("source: ASCII letters, digits and")
    assert client.get("/api/kb/topics").json()["total"] == 0
    imported = client.post("/api/kb/import", params={"format": "jsonl"},
                           content=json.dumps({**TOPIC, "source": source}).encode())
    assert "source: ASCII letters" in imported.text and client.get("/api/kb/topics").json()["total"] == 0


def test_every_documented_source_character_is_taken(client):
    resp = client.post("/api/kb/topics", json={**TOPIC, "source": "Faq.hours_v2-b:part#3@shop"})
    assert resp.status_code == 201, resp.text
    assert client.get("/api/kb/topics/Faq.hours_v2-b:part%233@shop").json()["title"] == TOPIC["title"]


def test_a_bad_topic_in_a_list_writes_none_of_the_list(client):
    resp = client.post("/api/kb/topics", json=[TOPIC, {"source": "x"}])
    assert resp.status_code == 422 and "topic 1" in resp.json()["message"] and "title" in resp.json()["message"]
    assert client.get("/api/kb/topics").json()["total"] == 0


def test_import_reports_bad_lines_by_number_and_imports_the_rest(client):
    jsonl = (
        '{"source": "a", "title": "Alpha", "body": "first"}\n'
        '{"title": "no source"}\n'
        "{not json\n"
        '{"source": "b", "title": "Beta", "body": "second", "facts": ["x"]}\n'
    )
    report = client.post("/api/kb/import", params={"format": "jsonl"}, content=jsonl).json()
    assert sorted(report["created"]) == ["a", "b"]
    assert [e["line"] for e in report["errors"]] == [2, 3]
    assert client.get("/api/kb/topics").json()["total"] == 2


def test_search_is_the_production_path_and_validates_its_input(client):
    client.post("/api/kb/topics", json=[
        TOPIC,
        {"source": "bikes", "title": "E-bike rental prices", "summary": "E-bikes cost 35 euros per day."},
    ])
    body = client.post("/api/kb/search", json={"query": "how much is an e-bike", "strategy": "bm25"}).json()
    assert body["strategy"] == "bm25" and body["results"][0]["source"] == "bikes"
    best = body["results"][0]
    assert set(best) == {"source", "title", "score", "legs"}
    assert 0.0 < best["score"] < 1.0 and set(best["legs"]) == {"bm25"} and best["legs"]["bm25"] > 1.0  # raw BM25
    assert body["timings_ms"]["total"] >= body["timings_ms"]["strategy_sparse"] and body["cache"] in ("miss", "off")
    with_history = client.post("/api/kb/search", json={
        "query": "and on weekdays?", "history": ["when are you open"], "strategy": "hybrid"}).json()
    assert with_history["results"][0]["source"] == "hours"
    assert client.post("/api/kb/search", json={"query": "x" * 4001}).status_code == 413
    assert client.post("/api/kb/search", json={"query": "  "}).status_code == 422
    unknown = client.post("/api/kb/search", json={"query": "hi", "strategy": "magic"})
    assert unknown.status_code == 422 and "magic" in unknown.json()["message"]


def test_a_new_question_is_not_pinned_to_the_topic_the_agent_just_quoted(client):
    client.post("/api/kb/topics", json=[
        TOPIC,
        {"source": "bikes", "title": "E-bike rental prices", "summary": "E-bikes cost 35 euros per day."},
    ])
    history = [{"role": "user", "text": "When are you open?"},
               {"role": "agent", "text": "Opening hours. We are open from 9 to 5 on weekdays, 9 to 5."}]
    for strategy in ("bm25", "hybrid"):
        body = client.post("/api/kb/search", json={
            "query": "How much is an e-bike?", "history": history, "strategy": strategy}).json()
        assert body["results"][0]["source"] == "bikes", strategy


def test_readyz_fails_when_the_knowledge_base_is_unreachable_and_chat_goes_on(gateway, fake_openai):
    assert httpx.get(f"{gateway.url}/readyz").json() == {"ready": True, "checks": {"redis": "ok", "qdrant": "ok"}}
    gateway.services.knowledge.client.close()  # Qdrant gone
    ready = httpx.get(f"{gateway.url}/readyz")
    assert ready.status_code == 503 and ready.json()["checks"]["qdrant"].startswith("failed")
    session = httpx.post(f"{gateway.url}/api/chat/sessions").json()
    reply = httpx.post(f"{gateway.url}/api/chat/sessions/{session['session_id']}/messages", json={"text": "hi"},
                       headers={"Authorization": f"Bearer {session['token']}"}, timeout=30)
    assert reply.status_code == 200 and reply.json()["reply"]["text"] == "echo: hi"

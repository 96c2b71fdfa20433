"""Hostile JSON bodies on the HTTP API: refused with 4xx and our JSON error body, nothing stored."""

from __future__ import annotations

import json

import httpx
import pytest

ADMIN = {"Authorization": "Bearer admin-secret"}
JSON = {"Content-Type": "application/json"}
TOPIC = {"source": "hours", "title": "Opening hours", "summary": "We are open from 9 to 5."}
DEEP = "[" * 100_000
HUGE_INT = "9" * 5000


@pytest.fixture
def client(gateway):
    with httpx.Client(base_url=gateway.url, timeout=30, headers=ADMIN) as c:
        yield c


def _refused(resp: httpx.Response, status: int, *fragments: str) -> None:
    body = resp.json()
    assert (resp.status_code, body["status"]) == (status, status), resp.text
    assert set(body) == {"status", "error", "message"}
    for fragment in fragments:
        assert fragment in body["message"], body["message"]


def _topics(client: httpx.Client) -> list[str]:
    return [t["source"] for t in client.get("/api/kb/topics").json()["topics"]]


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ('{"query": "opening \\ud800 hours"}', "body.query"),
        ('{"query": "and weekdays?", "history": ["\\udfff when are you open"]}', "body.history.0"),
        ('{"query": "and weekdays?", "history": [{"role": "user", "text": "x\\ud83d"}]}', "body.history.0.text"),
    ],
)
def test_a_lone_surrogate_in_a_search_is_400_saying_where(client, raw, where):
    client.post("/api/kb/topics", json=TOPIC)
    _refused(client.post("/api/kb/search", content=raw, headers=JSON), 400, where, "lone surrogate")
    # a proper pair of surrogate escapes is one character, and fine
    ok = client.post("/api/kb/search", content='{"query": "opening hours \\ud83d\\ude00"}', headers=JSON)
    assert ok.json()["results"][0]["source"] == "hours"


@pytest.mark.parametrize(
    ("method", "path"), [("POST", "/api/kb/topics"), ("PUT", "/api/kb/topics/x"), ("POST", "/api/kb/search")]
)
def test_deep_nesting_is_400_and_stores_nothing(client, method, path):
    _refused(client.request(method, path, content=DEEP, headers=JSON), 400, "nested deeper than 64 levels")
    shallow_but_too_deep = '{"source": "x", "title": "X", "facts": ' + "[" * 70 + "]" * 70 + "}"
    _refused(client.request(method, path, content=shallow_but_too_deep, headers=JSON), 400, "nested deeper")
    assert _topics(client) == []


@pytest.mark.parametrize(
    ("raw", "fragments"),
    [
        ('{"source": "x", "title": "X", "n": ' + HUGE_INT + "}", ("body.n", "5000 digits")),
        ('{"source": "x", "title": "X", "n": NaN}', ("body.n", "NaN")),
        ('{"source": "x", "title": "X", "n": 1e400}', ("body.n", "out of range")),
        ('{"source": "x", "title": "X\\ud800"}', ("body.title", "lone surrogate")),
        ('{"source": "x", "title": "X", "\\ud800": 1}', ("body", "lone surrogate) in a key")),
    ],
)
def test_numbers_and_unicode_json_cannot_hold_are_400(client, raw, fragments):
    _refused(client.post("/api/kb/topics", content=raw, headers=JSON), 400, *fragments)
    assert _topics(client) == []


def test_a_body_that_is_not_utf8_is_400(client):
    raw = b'{"source": "x", "title": "caf\xe9"}'
    _refused(client.post("/api/kb/topics", content=raw, headers=JSON), 400, "not valid UTF-8", "0xe9")
    _refused(client.post("/api/kb/search", content=b'{"query": "\xff"}', headers=JSON), 400, "not valid UTF-8")
    assert _topics(client) == []


def test_import_reports_hostile_lines_like_other_bad_lines(client, gateway):
    good = json.dumps({"source": "a", "title": "Alpha", "body": "first"})
    lines = [
        good,
        DEEP,
        '{"source": "b", "title": "Beta", "n": ' + HUGE_INT + "}",
        '{"source": "c", "title": "Gamma \\ud800"}',
        json.dumps({"source": "d", "title": "Delta", "body": "x" * 100_001}),
    ]
    resp = client.post("/api/kb/import", params={"format": "jsonl"}, content="\n".join(lines))
    assert resp.status_code == 200, resp.text
    errors = {e["line"]: e["message"] for e in resp.json()["errors"]}
    assert sorted(errors) == [2, 3, 4, 5]
    assert "nested deeper" in errors[2] and "5000 digits" in errors[3] and "lone surrogate" in errors[4]
    assert "the limit is 100000" in errors[5]
    assert _topics(client) == ["a"]
    _refused(client.post("/api/kb/import", params={"format": "jsonl"}, content=b'{"a": "\xff"}'), 400, "UTF-8")


def test_a_topic_over_the_size_limit_is_refused_and_not_stored(client):
    big = {**TOPIC, "summary": "open " * 20_000, "facts": ["x" * 1000]}
    _refused(client.post("/api/kb/topics", json=big), 422, "the limit is 100000")
    _refused(client.put("/api/kb/topics/hours", json=big), 422, "the limit is 100000")
    _refused(client.post("/api/kb/topics", json=[TOPIC, {**big, "source": "big"}]), 422, "topic 1")
    assert _topics(client) == []
    md = "# Huge\n\n" + "word " * 25_000 + "\n\n# Small\n\nfine\n"
    report = client.post("/api/kb/import", params={"format": "markdown"}, content=md).json()
    assert [e["line"] for e in report["errors"]] == [1] and _topics(client) == ["small"]


def test_attribute_values_and_persona_sections_have_a_size_limit(client, gateway):
    name = "project_attributes_setting_timezone"
    before = client.get(f"/api/attributes/{name}").json()["value"]
    _refused(client.put(f"/api/attributes/{name}", json={"value": "x" * 100_001}), 413, "the limit is 100000")
    assert client.get(f"/api/attributes/{name}").json()["value"] == before
    pid = httpx.post(f"{gateway.url}/api/chat/sessions").json()["persona_id"]
    _refused(client.put(f"/api/personas/{pid}/sections/notes", json={"value": "x" * 100_001}), 413, "limit")
    _refused(client.put(f"/api/personas/{pid}/sections/notes", content='{"value": "\\ud800"}', headers=JSON),
             400, "body.value", "lone surrogate")
    assert client.get(f"/api/personas/{pid}/attributes").json()["sections"] == {}
    assert client.put(f"/api/personas/{pid}/sections/notes", json={"value": "prefers email"}).json()["sections"] \
        == {"notes": "prefers email"}


def test_the_gateway_still_answers_after_every_refusal(client):
    for raw in (DEEP, '{"query": "\\ud800"}', '{"query": ' + HUGE_INT + "}"):
        assert client.post("/api/kb/search", content=raw, headers=JSON).status_code == 400
    assert client.post("/api/kb/topics", json=TOPIC).json()["created"] == ["hours"]
    assert client.post("/api/kb/search", json={"query": "opening hours"}).json()["results"][0]["source"] == "hours"


def test_a_conversation_list_offset_past_64_bits_is_422_not_a_redis_error(client):
    # found by the fuzzer: Redis refuses a range start that does not fit 64 bits, which was a 500
    _refused(client.get("/api/conversations", params={"offset": str(2**70)}), 422, "offset")
    listed = client.get("/api/conversations", params={"offset": "1000000"})
    assert listed.status_code == 200 and listed.json()["conversations"] == []

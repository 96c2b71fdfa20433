"""Whatever the language model (or a proxy in front of it) does, the user gets the fallback once,
the trace says why, and nothing is blamed on the user — over REST and over the socket."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from websockets.sync.client import connect

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer
from tests.inspect import read_trace

FALLBACK = "Sorry, I can't answer right now. Please try again in a moment."
HTML_PAGE = "<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>"


@pytest.fixture
def chat(gateway):
    with httpx.Client(base_url=gateway.url, timeout=20) as client:
        body = client.post("/api/chat/sessions").json()
        yield client, body


def _post(chat, text):
    client, body = chat
    return client.post(f"/api/chat/sessions/{body['session_id']}/messages", json={"text": text},
                       headers={"Authorization": f"Bearer {body['token']}"})


def _transcript(chat):
    client, body = chat
    return client.get(f"/api/chat/sessions/{body['session_id']}/messages",
                      headers={"Authorization": f"Bearer {body['token']}"}).json()["messages"]


@pytest.mark.parametrize("script, problem", [
    (lambda f: f.script_raw('{"id": "chatcmpl-1", "choices": [{"message": {"content": "Hel'), "not a chat completion"),
    (lambda f: f.script_raw(HTML_PAGE, content_type="text/html"), "an HTML page"),
    (lambda f: f.script_choices([]), "no text"),
    (lambda f: f.script_reply(""), "no text"),
], ids=["truncated-json", "html-page", "empty-choices", "empty-text"])
def test_rest_answers_the_fallback_once_with_the_reason_in_the_trace(chat, gateway, fake_openai, script, problem):
    script(fake_openai)
    resp = _post(chat, "When do you open?")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["reply"]["text"] == FALLBACK
    trace = read_trace(gateway.services, body["turn_id"])
    assert trace.responder == "fallback" and problem in trace.error
    assert [(m["role"], m["text"]) for m in _transcript(chat)] == [("user", "When do you open?"), ("agent", FALLBACK)]


def _socket_turn(gateway, chat, text):
    _, body = chat
    url = f"ws://127.0.0.1:{gateway.port}/api/chat/sessions/{body['session_id']}/ws?token={body['token']}"
    with connect(url) as ws:
        ws.send(json.dumps({"text": text}))
        while True:
            frame = json.loads(ws.recv(timeout=20))
            if frame["type"] != "delta":
                return frame


def _chunk(delta: dict | None = None, choices: list | None = None) -> str:
    body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": choices if choices is not None else [{"index": 0, "delta": delta or {}}]}
    return f"data: {json.dumps(body)}\n\n"


@pytest.mark.parametrize("events, problem", [
    ([_chunk({"content": "Hello"}), "data: {not json\n\n", "data: [DONE]\n\n"], "malformed event"),
    ([_chunk(choices=[]), _chunk(choices=[]), "data: [DONE]\n\n"], "without any text"),
    ([HTML_PAGE], "without any text"),
], ids=["bad-chunk", "empty-choices", "html-page"])
def test_socket_answers_the_fallback_and_never_blames_the_user(chat, gateway, fake_openai, events, problem):
    fake_openai.script_events(events)
    frame = _socket_turn(gateway, chat, "When do you open?")
    assert frame["type"] == "message", frame
    assert frame["reply"]["text"] == FALLBACK
    trace = read_trace(gateway.services, frame["turn_id"])
    assert problem in trace.error
    assert [(m["role"], m["text"]) for m in _transcript(chat)] == [("user", "When do you open?"), ("agent", FALLBACK)]


def test_a_hanging_llm_reaches_the_fallback_at_the_turn_deadline(settings, fake_openai):
    fake_openai.default_delay_s = 30  # every call hangs: the search LLM and the reply LLM
    slow = settings.model_copy(update={"turn_deadline_s": 2.0, "llm_timeout_s": 30, "llm_max_retries": 2})
    with LiveServer(create_app(slow)) as server, httpx.Client(base_url=server.url, timeout=20) as client:
        session = client.post("/api/chat/sessions").json()
        auth = {"Authorization": f"Bearer {session['token']}"}
        t0 = time.monotonic()
        body = client.post(f"/api/chat/sessions/{session['session_id']}/messages", json={"text": "hi"},
                           headers=auth).json()
        took = time.monotonic() - t0
        trace = read_trace(server.server.config.app.state.services, body["turn_id"])
    assert body["reply"]["text"] == FALLBACK
    assert took < 4, f"the fallback took {took:.1f} s with a 2 s turn deadline"
    assert "turn deadline" in trace.error


def test_a_hanging_search_llm_leaves_time_for_the_reply(settings, fake_openai):
    """Context preparation may use half the deadline; the reply still gets written."""
    slowed = settings.model_copy(update={"turn_deadline_s": 3.0, "retrieval_strategy": "llm_select"})
    with LiveServer(create_app(slowed)) as server, httpx.Client(base_url=server.url, timeout=20) as client:
        created = client.post("/api/kb/topics", headers={"Authorization": "Bearer admin-secret"}, json={
            "source": "hours", "title": "Opening hours", "summary": "Open 9-17.", "facts": ["open 9 to 5"]})
        assert created.status_code == 201, created.text
        fake_openai.script_reply("", delay_s=30)  # the search LLM hangs (the reply LLM is the next call)
        fake_openai.script_reply("We open at nine.")
        session = client.post("/api/chat/sessions").json()
        t0 = time.monotonic()
        body = client.post(f"/api/chat/sessions/{session['session_id']}/messages", json={"text": "opening hours?"},
                           headers={"Authorization": f"Bearer {session['token']}"}).json()
        took = time.monotonic() - t0
        trace = read_trace(server.server.config.app.state.services, body["turn_id"])
    assert body["reply"]["text"] == "We open at nine."
    assert 1.4 < took < 3, took
    assert "cut off" in trace.error

"""Web chat's rate limits on two replicas (two apps, one Redis) and the expiry of anonymous sessions."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
import redis
from websockets.sync.client import connect

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer

LIMITS = {"webchat_sessions_per_address": 3, "webchat_sessions_window_s": 60,
          "webchat_messages_per_session": 2, "webchat_messages_per_address": 3, "webchat_messages_window_s": 60}


@pytest.fixture
def replicas(settings) -> Iterator[tuple[LiveServer, LiveServer]]:
    configured = settings.model_copy(update=LIMITS)
    with LiveServer(create_app(configured)) as one, LiveServer(create_app(configured)) as two:
        yield one, two


def _session(server: LiveServer) -> tuple[str, dict]:
    body = httpx.post(f"{server.url}/api/chat/sessions").json()
    return body["session_id"], {"Authorization": f"Bearer {body['token']}"}


def _say(server: LiveServer, session: tuple[str, dict], text: str) -> httpx.Response:
    sid, auth = session
    return httpx.post(f"{server.url}/api/chat/sessions/{sid}/messages", json={"text": text}, headers=auth, timeout=10)


def _refusals(server: LiveServer, limit: str) -> float:
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        if line.startswith(f'switchboard_rate_limited_total{{limit="{limit}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_new_sessions_per_address_are_shared_by_replicas(replicas):
    one, two = replicas
    made = [httpx.post(f"{server.url}/api/chat/sessions") for server in (one, two, one)]
    assert [r.status_code for r in made] == [201, 201, 201]
    refused = httpx.post(f"{two.url}/api/chat/sessions")
    assert refused.status_code == 429
    body = refused.json()
    assert body["status"] == 429 and body["error"] == "rate_limited"
    assert body["message"].startswith("too many new chat sessions from one address: 3 per 60 s; try again in ")
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert _refusals(two, "webchat-session-address") == 1 and _refusals(one, "webchat-session-address") == 0


def test_new_sessions_are_allowed_again_when_the_window_ends(settings):
    configured = settings.model_copy(update={"webchat_sessions_per_address": 1, "webchat_sessions_window_s": 1})
    with LiveServer(create_app(configured)) as server:
        answers = [httpx.post(f"{server.url}/api/chat/sessions") for _ in range(3)]
        refused = next(a for a in answers if a.status_code == 429)  # the window is 1 s: a slow machine may see one
        assert refused.headers["retry-after"] == "1"
        deadline = time.monotonic() + 3
        while (again := httpx.post(f"{server.url}/api/chat/sessions")).status_code == 429:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert again.status_code == 201 and again.json()["session_id"]


def test_messages_are_limited_per_session_and_per_address_across_replicas(replicas, fake_openai):
    one, two = replicas
    first, second = _session(one), _session(two)
    assert _say(one, first, "one").json()["reply"]["text"] == "echo: one"
    assert _say(two, first, "two").json()["reply"]["text"] == "echo: two"
    third = _say(one, first, "three")  # the session's third message in the window
    assert third.status_code == 429 and "messages in one chat session: 2 per 60 s" in third.json()["message"]
    assert 1 <= int(third.headers["retry-after"]) <= 60
    sid, auth = first
    shown = httpx.get(f"{two.url}/api/chat/sessions/{sid}/messages", headers=auth).json()["messages"]
    assert [m["text"] for m in shown] == ["one", "echo: one", "two", "echo: two"]  # the refused one was not stored
    assert _say(two, second, "four").status_code == 429  # the address's fourth: another session does not help
    assert _refusals(one, "webchat-message-session") == 1 and _refusals(two, "webchat-message-address") == 1
    assert len(fake_openai.chat_requests()) == 2


def test_a_wrong_token_never_spends_the_visitors_own_allowance(settings, fake_openai):
    # The session and its limits are read in one round trip; the per-session count is kept per token tried.
    configured = settings.model_copy(update={**LIMITS, "webchat_messages_per_address": 100})
    with LiveServer(create_app(configured)) as server:
        visitor = _session(server)
        sid, _ = visitor
        stranger = (sid, {"Authorization": "Bearer not-the-token"})
        for text in ("x", "y", "z"):  # past the session's limit of 2, with a wrong token
            refused = _say(server, stranger, text)
            assert refused.status_code == 401 and refused.json()["message"] == "wrong session token"
        answers = [_say(server, visitor, text) for text in ("one", "two", "three")]
        assert [a.status_code for a in answers] == [200, 200, 429]  # the visitor's own 2 are intact
        assert answers[1].json()["reply"]["text"] == "echo: two"
        assert len(fake_openai.chat_requests()) == 2


def test_the_socket_answers_a_frame_past_the_limit_with_an_error_and_stays_open(replicas, fake_openai):
    one, two = replicas
    body = httpx.post(f"{one.url}/api/chat/sessions").json()
    url = f"ws://127.0.0.1:{two.port}/api/chat/sessions/{body['session_id']}/ws?token={body['token']}"

    def final(ws) -> dict:
        while (frame := json.loads(ws.recv(timeout=10)))["type"] == "delta":
            pass
        return frame

    with connect(url) as ws:
        for text in ("a", "b"):
            ws.send(json.dumps({"text": text}))
            assert final(ws)["type"] == "message"
        ws.send(json.dumps({"text": "c"}))
        refused = final(ws)
        assert refused["type"] == "error" and refused["status"] == 429 and refused["error"] == "rate_limited"
        assert 1 <= refused["retry_after"] <= 60
        ws.ping().wait(5)  # still open


def test_unused_anonymous_sessions_and_their_personas_expire_and_use_refreshes_them(settings, fake_openai):
    configured = settings.model_copy(update={"webchat_idle_ttl_s": 1})
    store = redis.Redis.from_url(settings.redis_url)
    prefix = f"sb:{settings.agent_id}:"
    with LiveServer(create_app(configured)) as server:
        body = httpx.post(f"{server.url}/api/chat/sessions").json()
        session = body["session_id"], {"Authorization": f"Bearer {body['token']}"}
        keys = [f"{prefix}webchat:session:{body['session_id']}", f"{prefix}identity:web:{body['session_id']}",
                f"{prefix}persona:{body['persona_id']}"]
        assert all(0 < store.pttl(k) <= 1000 for k in keys)
        time.sleep(0.6)
        assert _say(server, session, "still here").status_code == 200  # use starts the idle time again
        keys.append(f"{prefix}persona:{body['persona_id']}:msgs")
        assert all(600 < store.pttl(k) <= 1000 for k in keys)
        time.sleep(0.6)  # 1.2 s after creation: without the refresh it would be gone
        assert _say(server, session, "and again").status_code == 200
        deadline = time.monotonic() + 3
        while store.exists(*keys) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store.exists(*keys) == 0
        gone = _say(server, session, "hello?")
        assert gone.status_code == 404 and gone.json()["message"] == "unknown chat session"
    store.close()

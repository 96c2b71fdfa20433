"""A recording from the web chat widget's microphone (issue 44): posted to the session's voice route,
transcribed by the speech server and answered from the knowledge base like a typed message."""

from __future__ import annotations

import pytest

from gateway.core.models import Role
from tests.channels.conftest import settle
from tests.fakes import media_files

ADMIN = {"Authorization": "Bearer admin-secret"}
HOURS = [{"source": "hours", "title": "Opening hours", "facts": ["Mon-Fri 9:00-18:00"],
          "summary": "The shop is open Monday to Friday from 9:00 to 18:00."}]


@pytest.fixture
def channel_overrides() -> dict:
    return {"retrieval_strategy": "hybrid", "stt_max_seconds": 30}


def _session(client) -> tuple[str, dict]:
    session = client.post("/api/chat/sessions").json()
    return session["session_id"], {"Authorization": f"Bearer {session['token']}"}


def test_a_recording_is_transcribed_and_answered_from_the_knowledge_base(client, live, fake_openai, stored):
    assert client.post("/api/kb/topics", json=HOURS, headers=ADMIN).status_code == 201
    session_id, auth = _session(client)
    recording = media_files.ogg_opus(2.5)
    answer = client.post(f"/api/chat/sessions/{session_id}/voice", content=recording,
                         headers={**auth, "Content-Type": "audio/ogg"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["transcript"] == "What are your opening hours?"
    assert body["reply"]["text"] == "echo: What are your opening hours?"
    [heard] = fake_openai.audio_requests()
    assert heard["body"]["bytes"] == len(recording)
    [chat] = fake_openai.chat_requests()
    assert any("Monday to Friday from 9:00 to 18:00" in m["content"] for m in chat["body"]["messages"][:-1])
    transcript = client.get(f"/api/chat/sessions/{session_id}/messages", headers=auth).json()["messages"]
    assert [m["text"] for m in transcript] == ["What are your opening hours?", "echo: What are your opening hours?"]
    settle(live)
    [user] = [m for m in stored.messages(f"web:{session_id}") if m.role is Role.USER]
    assert user.media == "a voice note, transcribed (2.5 s, whisper-1)"


def test_a_recording_past_the_length_cap_gets_the_polite_answer(client, live, fake_openai):
    session_id, auth = _session(client)
    answer = client.post(f"/api/chat/sessions/{session_id}/voice", content=media_files.ogg_opus(31),
                         headers={**auth, "Content-Type": "audio/ogg"})
    assert "too long" in answer.json()["reply"]["text"]
    assert fake_openai.audio_requests() == [] and fake_openai.chat_requests() == []


def test_a_recording_needs_the_session_token(client, live, fake_openai):
    session_id, _ = _session(client)
    answer = client.post(f"/api/chat/sessions/{session_id}/voice", content=media_files.ogg_opus(1),
                         headers={"Authorization": "Bearer wrong"})
    assert answer.status_code == 401 and fake_openai.audio_requests() == []

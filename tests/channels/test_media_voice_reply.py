"""SWITCHBOARD_VOICE_REPLY (issue 44): a Telegram voice note is answered with text and a voice note made
by the speech server's /audio/speech; a typed message gets text only."""

from __future__ import annotations

import pytest

from tests.channels import vendors
from tests.channels.conftest import settle
from tests.fakes import media_files


@pytest.fixture
def channel_overrides() -> dict:
    return {"voice_reply": True, "retrieval_strategy": "hybrid"}


def test_a_voice_note_is_answered_with_text_and_a_voice_note(client, live, fake_telegram, fake_openai):
    fake_telegram.files["v"] = media_files.ogg_opus(2)
    voice = {"file_id": "v", "file_unique_id": "u-v", "duration": 2, "mime_type": "audio/ogg"}
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message(voice=voice)))
    settle(live)
    assert fake_telegram.sent_texts() == ["echo: What are your opening hours?"]
    [spoken] = [r for r in fake_openai.audio_requests() if r["path"] == "/v1/audio/speech"]
    assert spoken["body"]["input"] == "echo: What are your opening hours?" and spoken["body"]["model"] == "tts-1"
    [sent] = fake_telegram.recorder.received("sendVoice")
    assert int(sent.params["chat_id"]) == vendors.USER_ID
    methods = [c.method for c in fake_telegram.recorder.calls if c.method in ("sendMessage", "sendVoice")]
    assert methods == ["sendMessage", "sendVoice"]  # the text first


def test_a_typed_message_gets_no_voice(client, live, fake_telegram, fake_openai):
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("hello")))
    settle(live)
    assert fake_telegram.recorder.received("sendVoice") == [] and fake_openai.audio_requests() == []

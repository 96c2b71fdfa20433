"""With no speech-to-text server (no SWITCHBOARD_STT_BASE_URL and no language model configured), a voice
note gets the text-only answer of before (issue 44): nothing is downloaded."""

from __future__ import annotations

import pytest

from tests.channels import vendors
from tests.channels.conftest import settle
from tests.fakes import media_files


@pytest.fixture
def channel_overrides() -> dict:
    return {"llm_base_url": "https://api.openai.com/v1", "llm_api_key": None}


def test_a_voice_note_without_speech_to_text_gets_the_text_only_answer(client, live, fake_telegram, stored):
    fake_telegram.files["v"] = media_files.ogg_opus(2)
    voice = {"file_id": "v", "file_unique_id": "u-v", "duration": 2, "mime_type": "audio/ogg"}
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message(voice=voice)))
    settle(live)
    assert fake_telegram.sent_texts() == [live.services.settings.channel_unsupported_message]
    assert fake_telegram.served == [] and fake_telegram.recorder.received("getFile") == []
    user, _ = stored.messages(f"telegram:{vendors.USER_ID}")
    assert user.text == "[a voice note]"

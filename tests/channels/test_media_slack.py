"""A Slack audio clip sent to the bot (issue 44): downloaded with the bot token, transcribed by the speech
server and answered; a file on another host gets no token."""

from __future__ import annotations

import pytest

from tests.channels import vendors
from tests.channels.conftest import settle
from tests.fakes import media_files


@pytest.fixture
def channel_overrides() -> dict:
    return {"retrieval_strategy": "hybrid", "outbound_allow_hosts": "localhost"}  # "another host" for the test


def _clip(fake_slack, file_id: str, url: str | None = None) -> dict:
    return {"id": file_id, "name": "audio_message.webm", "mimetype": "audio/webm", "subtype": "slack_audio",
            "duration_ms": 2500, "size": 900,
            "url_private_download": url or f"{fake_slack.url}/files-pri/{file_id}/audio_message.webm"}


def test_a_slack_audio_clip_is_transcribed_and_answered(client, live, fake_slack, fake_openai, stored):
    note = media_files.ogg_opus(2.5)
    fake_slack.files["F0CLIP01"] = note
    event = vendors.slack_event("", kind="message", subtype="file_share", files=[_clip(fake_slack, "F0CLIP01")])
    assert vendors.post_slack(client, vendors.slack_envelope(event)).status_code == 200
    settle(live)
    [download] = fake_slack.recorder.received("files-pri")
    assert download.params["authorized"] is True
    [heard] = fake_openai.audio_requests()
    assert heard["body"]["bytes"] == len(note)
    assert fake_slack.sent_texts() == ["echo: What are your opening hours?"]
    user = stored.messages(f"slack:{vendors.slack_api.TEAM_ID}/U0ADA0001")[0]
    assert user.text == "What are your opening hours?" and user.media == "an audio file, transcribed (2.5 s, whisper-1)"


def test_a_file_elsewhere_gets_no_token(client, live, fake_slack, fake_openai):
    elsewhere = fake_slack.url.replace("127.0.0.1", "localhost") + "/files-pri/F0CLIP02/audio_message.webm"
    fake_slack.files["F0CLIP02"] = media_files.ogg_opus(1)
    event = vendors.slack_event("", kind="message", subtype="file_share", files=[_clip(fake_slack, "F0CLIP02",
                                                                                         elsewhere)])
    assert vendors.post_slack(client, vendors.slack_envelope(event)).status_code == 200
    settle(live)
    [download] = fake_slack.recorder.received("files-pri", ok_only=False)
    assert download.params["authorized"] is False  # fetched, but without the bot token: Slack's sign-in page
    assert fake_openai.audio_requests() == []
    assert fake_slack.sent_texts() == ["Sorry, I could not read that file. Please try again, or type your question."]

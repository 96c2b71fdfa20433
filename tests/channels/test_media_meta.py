"""WhatsApp Cloud media (issue 44): a voice note's media id is looked up in the Graph API, its URL fetched
with the connection's token, transcribed and answered; a photo reaches a vision agent as an image part."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from gateway.core.models import Role
from tests.channels import vendors
from tests.channels.conftest import settle
from tests.channels.connections_support import ADMIN, SECRET_KEY, add, webhook_path
from tests.fakes import media_files

WA_TOKEN = "EAAG-whatsapp-cloud-token-0044"
CUSTOMER = f"whatsapp:+{vendors.WA_CUSTOMER}"


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY), "retrieval_strategy": "hybrid"}


def _whatsapp(client, fake_meta, **extra) -> dict:
    fake_meta.add_account(vendors.WA_PHONE_NUMBER_ID, WA_TOKEN, "whatsapp", verified_name="Bike Shop")
    return add(client, kind="whatsapp_cloud", name="WhatsApp", credentials={
        "access_token": WA_TOKEN, "phone_number_id": vendors.WA_PHONE_NUMBER_ID,
        "app_secret": vendors.META_APP_SECRET}, **extra)


def test_a_whatsapp_cloud_voice_note_is_transcribed_and_answered(client, live, fake_meta, fake_openai, stored):
    wa = _whatsapp(client, fake_meta)
    note = media_files.ogg_opus(3.5)
    fake_meta.media["7001"] = (note, "audio/ogg")
    voice = {"from": vendors.WA_CUSTOMER, "id": "wamid.VOICE0044", "timestamp": "1749416386", "type": "audio",
             "audio": {"mime_type": "audio/ogg; codecs=opus", "sha256": "def", "id": "7001", "voice": True}}
    assert vendors.post_meta(client, webhook_path(wa), vendors.whatsapp_delivery(voice)).status_code == 200
    settle(live)
    assert [c.status for c in fake_meta.recorder.received("media-download", ok_only=False)] == [200]  # the token
    [heard] = fake_openai.audio_requests()
    assert heard["body"]["bytes"] == len(note)
    assert fake_meta.sent_texts(vendors.WA_CUSTOMER) == ["echo: What are your opening hours?"]
    user = next(m for m in stored.messages(f"{CUSTOMER}@{wa['id']}") if m.role is Role.USER)
    assert user.text == "What are your opening hours?" and user.media == "a voice note, transcribed (3.5 s, whisper-1)"


def test_a_whatsapp_cloud_photo_reaches_a_vision_agent(client, live, fake_meta, fake_openai):
    agent = client.post("/v1/agents", headers=ADMIN, json={"name": "eyes", "config": {"vision": True}}).json()["id"]
    wa = _whatsapp(client, fake_meta, agent=agent)
    fake_meta.media["7002"] = (media_files.png(), "image/png")
    photo = {"from": vendors.WA_CUSTOMER, "id": "wamid.PHOTO0044", "timestamp": "1749416383", "type": "image",
             "image": {"mime_type": "image/png", "sha256": "abc", "id": "7002", "caption": "Is this in stock?"}}
    assert vendors.post_meta(client, webhook_path(wa), vendors.whatsapp_delivery(photo)).status_code == 200
    settle(live)
    [image] = fake_openai.image_parts()
    assert image.startswith("data:image/jpeg;base64,") and "media-download" not in image
    assert fake_meta.sent_texts(vendors.WA_CUSTOMER) == ["echo: Is this in stock? [image]"]

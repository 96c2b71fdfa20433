"""A WhatsApp voice note through Twilio (issue 44): downloaded from its media URL with the account's basic
auth, transcribed by the speech server and answered from the knowledge base."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from gateway.core.models import Role
from tests.channels import vendors
from tests.channels.conftest import settle
from tests.channels.connections_support import ADMIN, SECRET_KEY, add, webhook_path
from tests.fakes import media_files

SID = "AC" + "5" * 32
TOKEN = "connection-auth-token-9012"
CUSTOMER = "+15557654321"
SENDER = "whatsapp:+14155238886"
HOURS = [{"source": "hours", "title": "Opening hours", "facts": ["Mon-Fri 9:00-18:00"],
          "summary": "The shop is open Monday to Friday from 9:00 to 18:00."}]


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY), "retrieval_strategy": "hybrid"}


def _form(message_sid: str, media_url: str, content_type: str) -> dict[str, str]:
    return {"MessageSid": message_sid, "AccountSid": SID, "From": "whatsapp:" + CUSTOMER, "To": SENDER, "Body": "",
            "NumMedia": "1", "MediaUrl0": media_url, "MediaContentType0": content_type, "ApiVersion": "2010-04-01"}


def test_a_whatsapp_voice_note_is_transcribed_and_answered_from_the_knowledge_base(
        client, live, fake_twilio, fake_openai, stored):
    fake_twilio.add_account(SID, TOKEN)
    assert client.post("/api/kb/topics", json=HOURS, headers=ADMIN).status_code == 201
    wa = add(client, kind="whatsapp", name="WhatsApp", credentials={"account_sid": SID, "auth_token": TOKEN,
                                                                   "sender": SENDER})
    note = media_files.ogg_opus(4.5)
    fake_twilio.media["ME" + "1" * 32] = (note, "audio/ogg")
    message_sid = "MM" + "2" * 32
    media_url = f"{fake_twilio.url}/2010-04-01/Accounts/{SID}/Messages/{message_sid}/Media/ME{'1' * 32}"
    form = _form(message_sid, media_url, "audio/ogg")
    assert vendors.post_twilio(client, webhook_path(wa), form, token=TOKEN).status_code == 200
    settle(live)
    [fetched] = fake_twilio.recorder.received("Media")  # with the account's basic auth (the fake checks it)
    assert fetched.status == 200
    [heard] = fake_openai.audio_requests()
    assert heard["body"]["bytes"] == len(note)
    [chat] = fake_openai.chat_requests()
    said = [m["content"] for m in chat["body"]["messages"]]
    assert said[-1] == "What are your opening hours?"
    assert any("Monday to Friday from 9:00 to 18:00" in m for m in said[:-1])
    assert fake_twilio.sent_texts("whatsapp:" + CUSTOMER) == ["echo: What are your opening hours?"]
    user, agent = stored.messages(f"whatsapp:{CUSTOMER}@{wa['id']}")
    assert user.role is Role.USER and user.text == "What are your opening hours?"
    assert user.media == "an audio file, transcribed (4.5 s, whisper-1)"  # its length read from its own header
    assert TOKEN not in stored.all_values()


def test_media_on_another_host_gets_no_credentials_and_is_refused(client, live, fake_twilio, fake_openai, stored):
    fake_twilio.add_account(SID, TOKEN)
    wa = add(client, kind="whatsapp", name="WhatsApp", credentials={"account_sid": SID, "auth_token": TOKEN,
                                                                   "sender": SENDER})
    form = _form("MM" + "3" * 32, "http://10.0.0.7/internal/secret.ogg", "audio/ogg")
    assert vendors.post_twilio(client, webhook_path(wa), form, token=TOKEN).status_code == 200
    settle(live)
    assert fake_twilio.sent_texts("whatsapp:" + CUSTOMER) == [
        "Sorry, I could not read that file. Please try again, or type your question."]
    assert fake_openai.audio_requests() == [] and fake_openai.chat_requests() == []

"""Twilio numbers and WhatsApp senders added through /api/connections."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from tests.channels import vendors
from tests.channels.conftest import settle
from tests.channels.connections_support import ADMIN, SECRET_KEY, add, webhook_path

SID = "AC" + "7" * 32
TOKEN = "connection-auth-token-5678"
CUSTOMER = "+15557654321"


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY)}


@pytest.fixture
def account(fake_twilio) -> None:
    fake_twilio.add_account(SID, TOKEN)


def _inbound(sid: str, frm: str, to: str, body: str = "", **extra) -> dict[str, str]:
    return {"MessageSid": sid, "AccountSid": SID, "From": frm, "To": to, "Body": body, "NumMedia": "0",
            "ApiVersion": "2010-04-01", **extra}


def test_a_number_added_through_the_api_answers_from_that_number(client, live, account, fake_twilio, fake_openai,
                                                                  stored):
    number = add(client, kind="twilio_sms", name="Shop line",
                 credentials={"account_sid": SID, "auth_token": TOKEN, "phone_number": "+15550009999"})
    assert number["status"]["account"] == "Account 7777" and number["enabled"]
    assert number["credentials"] == {"account_sid": "••••7777", "auth_token": "••••5678",
                                     "phone_number": "+15550009999"}
    path = webhook_path(number)
    assert path == f"/channels/twilio/{number['id']}/sms"
    form = _inbound("SM" + "a" * 32, CUSTOMER, "+15550009999", "Are you open on Sunday?")
    assert vendors.post_twilio(client, path, form).status_code == 403  # the environment account's signature
    assert vendors.post_twilio(client, path, form, token=TOKEN).status_code == 200
    settle(live)
    [sent] = fake_twilio.messages(CUSTOMER)
    assert sent["From"] == "+15550009999" and sent["Body"] == "echo: Are you open on Sunday?"
    [key] = fake_twilio.tokens  # sent with an idempotency key: the connection's sink stays an IdempotentSink
    assert key and key.endswith(":1")
    assert [m.text for m in stored.messages(f"phone:{CUSTOMER}@{number['id']}")][-1] == sent["Body"]


def test_whatsapp_text_media_and_the_24_hour_refusal(client, live, account, fake_twilio, fake_openai, stored):
    sender = "whatsapp:+14155238886"
    wa = add(client, kind="whatsapp", name="WhatsApp", credentials={"account_sid": SID, "auth_token": TOKEN,
                                                                   "sender": sender})
    path = webhook_path(wa)
    assert path == f"/channels/whatsapp/{wa['id']}"
    customer = "whatsapp:" + CUSTOMER
    fake_openai.script_reply("Long answer. " * 400)  # 5,200 characters: two WhatsApp messages
    form = _inbound("SM" + "b" * 32, customer, sender, "Tell me everything", ProfileName="Ada", WaId=CUSTOMER[1:])
    assert vendors.post_twilio(client, path, form, token=TOKEN).status_code == 200
    settle(live)
    sent = fake_twilio.messages(customer)
    assert len(sent) == 2 and all(m["From"] == sender and len(m["Body"]) <= 4096 for m in sent)

    media_url = f"https://api.twilio.com/2010-04-01/Accounts/{SID}/Messages/MM{'c' * 32}/Media/ME{'d' * 32}"
    photo = _inbound("MM" + "c" * 32, customer, sender, NumMedia="1", MediaUrl0=media_url,
                     MediaContentType0="image/jpeg")
    assert vendors.post_twilio(client, path, photo, token=TOKEN).status_code == 200
    settle(live)
    # the agent is not vision-capable: a polite answer, the photo never downloaded (test_media_twilio.py)
    assert fake_twilio.sent_texts(customer)[-1] == "I can't see photos, sorry: please describe what it shows in words."
    transcript = [m.text for m in stored.messages(f"whatsapp:{CUSTOMER}@{wa['id']}")]
    assert transcript[-2:] == ["[a photo]", "I can't see photos, sorry: please describe what it shows in words."]
    assert len(fake_openai.chat_requests()) == 1  # the photo reached no model
    video = _inbound("MM" + "f" * 32, customer, sender, NumMedia="1", MediaUrl0=media_url + "0",
                     MediaContentType0="video/mp4")  # media the bot does not read: the text-only answer
    assert vendors.post_twilio(client, path, video, token=TOKEN).status_code == 200
    settle(live)
    assert fake_twilio.sent_texts(customer)[-1] == "I can read text messages only: please type your question."
    transcript = [m.text for m in stored.messages(f"whatsapp:{CUSTOMER}@{wa['id']}")]
    assert transcript[-2] == f"[video/mp4] {media_url}0"

    fake_twilio.outside_window.add(customer)
    assert vendors.post_twilio(client, path, _inbound("SM" + "e" * 32, customer, sender, "Still there?"),
                               token=TOKEN).status_code == 200
    settle(live)
    messages = stored.messages(f"whatsapp:{CUSTOMER}@{wa['id']}")
    question, reply = messages[-2:]
    assert question.text == "Still there?" and reply.delivery.value == "failed"
    assert "24-hour" in reply.delivery_error and "waiting for a template" in reply.delivery_error
    [trace] = [t for t in stored.traces(question) if t.user_message_id == question.id]
    assert "63016" in trace.delivery_error and trace.connection == wa["id"]
    status = client.get(f"/api/connections/{wa['id']}", headers=ADMIN).json()["status"]
    assert status["waiting_for_template"] == 1 and "63016" in status["last_error"]


def test_refused_twilio_credentials_store_nothing(client, live, account, stored):
    answer = client.post("/api/connections", headers=ADMIN, json={
        "kind": "whatsapp", "name": "x", "credentials": {"account_sid": SID, "auth_token": "wrong",
                                                         "sender": "whatsapp:+14155238886"}})
    assert answer.status_code == 422 and answer.json()["message"].startswith("credentials.auth_token: Twilio refused")
    assert stored.keys("connection*") == []


def test_a_refusal_reported_later_by_twilio_marks_the_reply_and_its_trace(client, live, account, fake_twilio,
                                                                         fake_openai, stored):
    sender = "whatsapp:+14155238886"
    wa = add(client, kind="whatsapp", name="WhatsApp", credentials={"account_sid": SID, "auth_token": TOKEN,
                                                                   "sender": sender})
    customer = "whatsapp:" + CUSTOMER
    assert vendors.post_twilio(client, webhook_path(wa), _inbound("SM" + "f" * 32, customer, sender, "Hi"),
                               token=TOKEN).status_code == 200
    settle(live)
    [sent] = fake_twilio.messages(customer)
    assert sent["StatusCallback"] == wa["webhook_url"] + "/status"
    [sid_key] = stored.keys("whatsapp:sent:*")
    sid = sid_key.rsplit(":", 1)[1]
    status = {"MessageSid": sid, "MessageStatus": "undelivered", "ErrorCode": "63016", "To": customer,
              "From": sender, "AccountSid": SID, "ApiVersion": "2010-04-01"}
    path = webhook_path(wa) + "/status"
    assert vendors.post_twilio(client, path, status).status_code == 403  # not this account's signature
    assert vendors.post_twilio(client, path, status, token=TOKEN).status_code == 200
    question, reply = stored.messages(f"whatsapp:{CUSTOMER}@{wa['id']}")
    assert reply.text == "echo: Hi" and reply.delivery.value == "failed"
    assert "waiting for a template" in reply.delivery_error
    [trace] = stored.traces(question)
    assert "63016" in trace.delivery_error
    assert client.get(f"/api/connections/{wa['id']}", headers=ADMIN).json()["status"]["waiting_for_template"] == 1


def test_a_status_callback_signed_by_another_connection_cannot_mark_this_ones_reply(client, live, account,
                                                                                   fake_twilio, fake_openai, stored):
    other_sid, other_token = "AC" + "8" * 32, "other-auth-token-8888"
    fake_twilio.add_account(other_sid, other_token)
    sender = "whatsapp:+14155238886"
    mine = add(client, kind="whatsapp", name="Mine", credentials={"account_sid": SID, "auth_token": TOKEN,
                                                                   "sender": sender})
    theirs = add(client, kind="whatsapp", name="Theirs", credentials={
        "account_sid": other_sid, "auth_token": other_token, "sender": "whatsapp:+14155230000"})
    customer = "whatsapp:" + CUSTOMER
    assert vendors.post_twilio(client, webhook_path(mine), _inbound("SM" + "9" * 32, customer, sender, "Hi"),
                               token=TOKEN).status_code == 200
    settle(live)
    [sent] = fake_twilio.messages(customer)
    [sid_key] = stored.keys("whatsapp:sent:*")
    sid = sid_key.rsplit(":", 1)[1]
    status = {"MessageSid": sid, "MessageStatus": "undelivered", "ErrorCode": "30008", "To": customer,
              "From": sender, "AccountSid": other_sid, "ApiVersion": "2010-04-01"}
    # signed by the other connection's account, at its own status URL: accepted, but names no reply of its own
    assert vendors.post_twilio(client, webhook_path(theirs) + "/status", status, token=other_token).status_code == 200
    question, reply = stored.messages(f"whatsapp:{CUSTOMER}@{mine['id']}")
    assert reply.text == "echo: Hi" and reply.delivery.value == "delivered" and reply.delivery_error is None
    [trace] = stored.traces(question)
    assert trace.delivery_error is None
    assert client.get(f"/api/connections/{mine['id']}", headers=ADMIN).json()["status"]["last_error"] is None
    # the same callback signed by this connection's own account marks it
    status["AccountSid"] = SID
    assert vendors.post_twilio(client, webhook_path(mine) + "/status", status, token=TOKEN).status_code == 200
    question, reply = stored.messages(f"whatsapp:{CUSTOMER}@{mine['id']}")
    assert reply.delivery.value == "failed" and "30008" in reply.delivery_error

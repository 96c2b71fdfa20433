"""A turn already running when an operator disables or deletes its connection (its token leaked, say)
does not send its reply: the reply is recorded as not sent, with the reason."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from tests.channels import vendors
from tests.channels.conftest import settle, wait_until
from tests.channels.connections_support import ADMIN, SECRET_KEY, add, post_update, webhook_path

SID, TOKEN, NUMBER, CUSTOMER = "AC" + "6" * 32, "withheld-auth-token-6666", "+15550006666", "+15557654321"


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY)}


def _telegram(client, fake_telegram):
    token = fake_telegram.add_bot(7900001, "leaky_bot")
    bot = add(client, kind="telegram", name="Leaky", credentials={"bot_token": token})
    [call] = [c for c in fake_telegram.recorder.received("setWebhook") if c.params["_bot"] == "leaky_bot"]
    update = vendors.telegram_update(vendors.telegram_message("are you there?"))
    assert post_update(client, bot, update, call.params["secret_token"]).status_code == 200
    return bot, f"telegram:{vendors.USER_ID}", lambda: fake_telegram.sent_by("leaky_bot")


def _sms(client, fake_twilio):
    fake_twilio.add_account(SID, TOKEN)
    number = add(client, kind="twilio_sms", name="Leaky line",
                 credentials={"account_sid": SID, "auth_token": TOKEN, "phone_number": NUMBER})
    form = {"MessageSid": "SM" + "6" * 32, "AccountSid": SID, "From": CUSTOMER, "To": NUMBER,
            "Body": "are you there?", "NumMedia": "0", "ApiVersion": "2010-04-01"}
    assert vendors.post_twilio(client, webhook_path(number), form, token=TOKEN).status_code == 200
    return number, f"phone:{CUSTOMER}", lambda: fake_twilio.messages(CUSTOMER)


@pytest.mark.parametrize("kind, action", [("telegram", "disabled"), ("telegram", "deleted"), ("twilio_sms", "deleted")])
def test_a_running_turn_does_not_reply_through_a_connection_disabled_or_deleted_meanwhile(
        kind, action, client, live, fake_telegram, fake_twilio, fake_openai, stored):
    fake_openai.script_reply("Here is the answer.", delay_s=1.5)
    connection, customer, sent = (_telegram(client, fake_telegram) if kind == "telegram"
                                  else _sms(client, fake_twilio))
    wait_until(fake_openai.chat_requests, what="the turn to ask the model")  # the turn is running
    if action == "disabled":
        answer = client.patch(f"/api/connections/{connection['id']}", json={"enabled": False}, headers=ADMIN)
        assert answer.status_code == 200 and answer.json()["enabled"] is False
    else:
        assert client.delete(f"/api/connections/{connection['id']}", headers=ADMIN).status_code == 204
    settle(live)

    assert sent() == []
    question, reply = stored.messages(f"{customer}@{connection['id']}")
    assert question.text == "are you there?" and reply.text == "Here is the answer."
    assert reply.delivery.value == "failed"
    assert reply.delivery_error == f"not sent: connection {connection['id']} was {action} before the reply was ready"
    [trace] = stored.traces(question)
    assert trace.delivery_error == reply.delivery_error and not trace.delivery_retryable
    if action == "deleted":  # nothing of the connection comes back (its status hash included)
        assert stored.keys(f"connection:{connection['id']}*") == []

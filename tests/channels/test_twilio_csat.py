"""The SMS closing question (CSAT): asked once the conversation has been idle, through the real timer; a 1-5
or yes/no answer is recorded as the conversation's rating and starts no turn; anything else is a turn and
closes the question. WhatsApp (a console-added sender) the same."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from gateway.http.app import create_app
from gateway.services import Services
from tests.channels import vendors
from tests.channels.conftest import settle, wait_until
from tests.channels.connections_support import ADMIN, SECRET_KEY, add, webhook_path
from tests.fakes.live_server import LiveServer

PROMPT = "How did we do? Reply with a number from 1 (bad) to 5 (great)."


@pytest.fixture
def channel_overrides() -> dict:
    return {"csat_prompt": PROMPT, "csat_after_s": 1, "secret_key": SecretStr(SECRET_KEY)}


@pytest.fixture
def live(channel_settings) -> Iterator[LiveServer]:
    """The gateway with its RQ worker in process: the closing question's timer runs on RQ's scheduler."""
    with LiveServer(create_app(channel_settings, services=Services.build(channel_settings, run_worker=True))) as server:
        server.services = server.server.config.app.state.services
        yield server


def _sms(client, body: str):
    return vendors.post_twilio(client, "/channels/twilio/sms", vendors.sms_params(body))


def _csat(client) -> dict:
    return client.get("/api/insights", headers=ADMIN).json()["csat"]


def test_an_idle_sms_conversation_is_asked_once_and_its_answer_is_a_rating(client, live, fake_twilio, fake_openai,
                                                                          stored):
    fake_openai.script_reply("We open at 9.")
    _sms(client, "When do you open?")
    wait_until(lambda: PROMPT in fake_twilio.sent_texts(), timeout=30, what="the closing question")
    assert fake_twilio.sent_texts() == ["We open at 9.", PROMPT]

    _sms(client, "4")
    wait_until(lambda: _csat(client)["count"] == 1, what="the rating counted")
    settle(live)
    assert _csat(client) == {"count": 1, "average": 4.0}
    assert len(fake_openai.chat_requests()) == 1  # the answer was not sent to the model
    assert fake_twilio.sent_texts() == ["We open at 9.", PROMPT]  # nor answered
    texts = [m.text for m in stored.messages(f"phone:{vendors.CALLER}")]
    assert texts == ["When do you open?", "We open at 9.", PROMPT]

    # the question is answered: the next "5" is an ordinary message, and the conversation is not asked again
    fake_openai.script_reply("Glad to help!")
    _sms(client, "5")
    settle(live)
    assert len(fake_openai.chat_requests()) == 2
    assert _csat(client) == {"count": 1, "average": 4.0}
    settle(live, timeout=3)
    assert fake_twilio.sent_texts().count(PROMPT) == 1


def test_anything_else_is_a_turn_and_closes_the_question(client, live, fake_twilio, fake_openai):
    fake_openai.script_reply("We open at 9.")
    _sms(client, "When do you open?")
    wait_until(lambda: PROMPT in fake_twilio.sent_texts(), timeout=30, what="the closing question")
    fake_openai.script_reply("We are at 1 Main St.")
    _sms(client, "and where are you?")
    wait_until(lambda: "We are at 1 Main St." in fake_twilio.sent_texts(), what="the turn's reply")
    settle(live)
    fake_openai.script_reply("Ok.")
    _sms(client, "no")
    settle(live)
    assert len(fake_openai.chat_requests()) == 3  # "no" after another message is just a message
    assert _csat(client) == {"count": 0, "average": None}


def test_a_whatsapp_customer_answers_the_question_too(client, live, fake_twilio, fake_openai, stored):
    sid, token, sender, customer = "AC" + "5" * 32, "wa-auth-token-4321", "whatsapp:+14155238886", "+15557654321"
    fake_twilio.add_account(sid, token)
    wa = add(client, kind="whatsapp", name="WhatsApp", credentials={"account_sid": sid, "auth_token": token,
                                                                   "sender": sender})

    def inbound(message_sid: str, body: str) -> dict[str, str]:
        return {"MessageSid": message_sid, "AccountSid": sid, "From": "whatsapp:" + customer, "To": sender,
                "Body": body, "NumMedia": "0", "ApiVersion": "2010-04-01", "WaId": customer[1:]}

    fake_openai.script_reply("Our bikes cost 35 euros a day.")
    vendors.post_twilio(client, webhook_path(wa), inbound("SM" + "1" * 32, "How much is a bike?"), token=token)
    wait_until(lambda: PROMPT in fake_twilio.sent_texts("whatsapp:" + customer), timeout=30,
               what="the closing question on WhatsApp")
    vendors.post_twilio(client, webhook_path(wa), inbound("SM" + "2" * 32, "5"), token=token)
    wait_until(lambda: _csat(client)["count"] == 1, what="the rating counted")
    settle(live)
    assert _csat(client) == {"count": 1, "average": 5.0}
    assert len(fake_openai.chat_requests()) == 1
    assert fake_twilio.sent_texts("whatsapp:" + customer) == ["Our bikes cost 35 euros a day.", PROMPT]

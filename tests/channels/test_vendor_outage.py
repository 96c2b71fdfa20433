"""A Telegram outage does not turn deliveries into dead letters: the reply waits (saying why, in
``GET /api/inbox``) and goes out once Telegram is back; a chat's later messages wait behind it, in
order; only a delivery still failing when the retry window is over is dead-lettered, with its reason."""

from __future__ import annotations

import time

import httpx
import pytest

from gateway.core.models import Role
from tests.channels import vendors
from tests.channels.conftest import settle, wait_until

ADMIN = {"Authorization": "Bearer admin-secret"}


@pytest.fixture
def channel_overrides() -> dict:
    return {"inbox_retry_window_s": 30.0, "inbox_retry_first_s": 0.1, "inbox_retry_max_s": 0.4}


def _inbox(client: httpx.Client) -> dict:
    return client.get("/api/inbox", headers=ADMIN).json()


def test_a_reply_waits_out_the_outage_and_arrives_once_telegram_is_back(
        client, live, fake_telegram, fake_openai, stored):
    fake_telegram.recorder.outage("sendMessage", 502, description="Bad Gateway")
    fake_openai.script_reply("We open at nine.")
    assert vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("When do you open?"))
                                 ).status_code == 200

    [waiting] = wait_until(lambda: _inbox(client)["waiting"], what="the delivery to wait")
    assert waiting["channel"] == "telegram" and waiting["waiting_for"] == "its reply to be sent"
    assert waiting["error_kind"] == "ReplyNotSent" and "Bad Gateway" in waiting["error"]
    assert waiting["next_try_at"] > waiting["first_failure_at"] and waiting["attempts"] >= 1
    assert "fake-token" not in str(waiting)  # the bot token is in every Bot API URL: never in the record
    assert fake_telegram.sent_texts() == []

    fake_telegram.recorder.back("sendMessage")
    wait_until(lambda: fake_telegram.sent_texts(), what="the reply after the outage")
    settle(live)
    state = _inbox(client)
    assert state["dead"] == 0 and state["dead_letters"] == [] and state["waiting"] == []
    assert fake_telegram.sent_texts(vendors.USER_ID) == ["We open at nine."]
    assert len(fake_openai.chat_requests()) == 1  # only the send was tried again, not the turn
    [_, agent] = stored.messages(f"telegram:{vendors.USER_ID}")
    assert agent.role is Role.AGENT and agent.delivery.value == "delivered"


def test_a_chats_later_message_waits_behind_the_earlier_one_and_keeps_its_order(
        client, live, fake_telegram, fake_openai):
    fake_telegram.recorder.outage("sendMessage", 503, description="Service Unavailable")
    fake_openai.script_reply("first answer")
    fake_openai.script_reply("second answer")
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("first question")))
    wait_until(lambda: _inbox(client)["waiting"], what="the first delivery to wait")
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("second question")))

    behind = wait_until(lambda: [w for w in _inbox(client)["waiting"] if w["error_kind"] == "WaitingBehind"],
                        what="the second delivery to wait behind the first")
    assert behind[0]["waiting_for"] == "an earlier delivery of this chat"
    assert len(fake_openai.chat_requests()) == 1  # the second turn has not run ahead of the first reply

    fake_telegram.recorder.back("sendMessage")
    wait_until(lambda: len(fake_telegram.sent_texts()) == 2, what="both replies")
    settle(live)
    assert fake_telegram.sent_texts(vendors.USER_ID) == ["first answer", "second answer"]
    assert _inbox(client)["dead"] == 0


@pytest.mark.parametrize("channel_overrides", [
    {"inbox_retry_window_s": 0.8, "inbox_retry_first_s": 0.1, "inbox_retry_max_s": 0.2}])
def test_a_delivery_still_failing_after_the_window_is_dead_lettered_with_its_reason(
        client, live, fake_telegram, fake_openai, channel_overrides):
    fake_telegram.recorder.fail_always("sendMessage", 502)
    fake_openai.script_reply("never delivered")
    started = time.monotonic()
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("anyone there?")))

    [letter] = wait_until(lambda: _inbox(client)["dead_letters"], timeout=10, what="the dead letter")
    assert time.monotonic() - started >= channel_overrides["inbox_retry_window_s"]  # not cut short
    assert "still failing after 0.8 s" in letter["error"] and "ReplyNotSent" in letter["error"]
    assert int(letter["attempts"]) >= 1 and letter["c"] == "telegram"
    settle(live)
    state = _inbox(client)
    assert state["waiting"] == [] and state["length"] == 0
    tries = fake_telegram.recorder.received("sendMessage", ok_only=False)
    assert len(tries) > live.services.settings.channel_send_tries  # tried again and again within the window
    assert fake_telegram.sent_texts() == []


def test_a_delivery_whose_turn_cannot_be_accepted_waits_too(client, live, fake_telegram, fake_openai):
    # A fresh gateway asks Telegram who it is (getMe) before it reads the first update.
    fake_telegram.recorder.outage("getMe", 502, description="Bad Gateway")
    fake_openai.script_reply("Back again.")
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("hello?")))

    [waiting] = wait_until(lambda: _inbox(client)["waiting"], what="the delivery to wait")
    assert waiting["waiting_for"] == "its turn to be accepted" and waiting["error_kind"] == "ServiceUnavailable"
    assert "getMe" in waiting["error"]

    fake_telegram.recorder.back("getMe")
    wait_until(lambda: fake_telegram.sent_texts(), what="the reply after the outage")
    settle(live)
    assert fake_telegram.sent_texts() == ["Back again."] and _inbox(client)["dead"] == 0


def test_an_sms_resent_after_an_outage_goes_under_its_turns_idempotency_token(
        client, live, fake_twilio, fake_openai, stored):
    """Parts that Twilio took before the outage are not sent twice: the resend carries the first send's keys."""
    fake_twilio.recorder.outage("Messages", 503)
    fake_openai.script_reply("Your bike is ready.")
    vendors.post_twilio(client, "/channels/twilio/sms", vendors.sms_params("Is my bike ready?"))
    wait_until(lambda: _inbox(client)["waiting"], what="the SMS reply to wait")
    assert fake_twilio.sent_texts() == []

    fake_twilio.recorder.back("Messages")
    wait_until(lambda: fake_twilio.sent_texts(), what="the SMS after the outage")
    settle(live)
    assert fake_twilio.sent_texts(vendors.CALLER) == ["Your bike is ready."]
    [_, agent] = stored.messages(f"phone:{vendors.CALLER}")
    assert agent.delivery.value == "delivered" and agent.turn_id
    assert fake_twilio.tokens == [f"{agent.turn_id}:1"]  # part 1, as the first send keyed it

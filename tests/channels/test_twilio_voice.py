"""Twilio voice: the TwiML each webhook returns, and what the call leaves stored."""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET

import pytest

from gateway.core.models import Role
from tests.channels import vendors
from tests.channels.conftest import metric, settle, wait_until

TURN = vendors.PUBLIC_URL + "/channels/twilio/voice/turn"


def _call_sid() -> str:
    return "CA" + uuid.uuid4().hex


def _post(client, path: str, call_sid: str, **extra):
    resp = vendors.post_twilio(client, path, vendors.call_params(call_sid, **extra))
    assert resp.status_code in (200, 204), resp.text
    return resp


def _twiml(resp) -> ET.Element:
    assert resp.headers["content-type"].startswith("application/xml")
    return ET.fromstring(resp.text)


def test_incoming_call_greets_inside_a_barge_in_speech_gather(client):
    root = _twiml(_post(client, "/channels/twilio/voice", _call_sid(), CallStatus="ringing"))
    gather, redirect = list(root)
    assert gather.tag == "Gather" and gather.get("input") == "speech dtmf" and gather.get("bargeIn") == "true"
    assert gather.get("action") == TURN + "?n=1" and gather.get("speechTimeout") == "auto"
    assert gather.find("Say").text == "Hello! How can I help you today?"
    assert redirect.tag == "Redirect" and redirect.text == TURN + "?n=1&quiet=1"


def test_speech_turn_is_answered_with_say_inside_the_next_gather(client, live, fake_openai, stored):
    fake_openai.script_reply("We're open **9 to 5** 🙂 — details at https://example.com/hours.")
    sid = _call_sid()
    root = _twiml(_post(client, "/channels/twilio/voice/turn?n=1", sid, SpeechResult="When are you open?",
                        Confidence="0.92"))
    gather = root.find("Gather")
    assert gather.get("action") == TURN + "?n=2" and gather.get("bargeIn") == "true"
    assert gather.find("Say").text == "We're open 9 to 5 — details at"
    assert root.find("Redirect").text == TURN + "?n=2&quiet=1"
    settle(live)
    [user, agent] = stored.messages(f"phone:{vendors.CALLER}")
    assert (user.text, user.channel, agent.role) == ("When are you open?", "twilio_voice", Role.AGENT)


@pytest.mark.parametrize("channel_overrides", [{"twilio_greeting_disclosure": "This call may be recorded."}])
def test_the_disclosure_comes_first_and_keys_pressed_are_a_turn(client, live, fake_openai, stored):
    greeting = _twiml(_post(client, "/channels/twilio/voice", _call_sid(), CallStatus="ringing"))
    assert greeting.find("Gather/Say").text == "This call may be recorded. Hello! How can I help you today?"
    root = _twiml(_post(client, "/channels/twilio/voice/turn?n=1", _call_sid(), Digits="12#"))
    assert root.find("Gather/Say").text == "echo: [pressed 1 2 #]"
    assert fake_openai.chat_requests()[-1]["body"]["messages"][-1]["content"] == "[pressed 1 2 #]"


@pytest.fixture
def short_deadline(channel_overrides):
    channel_overrides["voice_reply_deadline_s"] = 0.3
    channel_overrides["rag_voice_wait_ms"] = 50  # no worker runs RAG jobs here; don't spend the fillers on it


def test_slow_reply_says_a_filler_and_redirects_to_pick_it_up(short_deadline, client, live, fake_openai):
    fake_openai.script_reply("Here is the slow answer.", delay_s=0.8)
    sid = _call_sid()
    first = _twiml(_post(client, "/channels/twilio/voice/turn?n=1", sid, SpeechResult="something slow"))
    assert [el.tag for el in first] == ["Say", "Redirect"]
    assert first.find("Say").text == "One moment please."
    assert first.find("Redirect").text == TURN + "?n=1&wait=1"
    picked = None
    for wait in range(1, 6):
        root = _twiml(_post(client, f"/channels/twilio/voice/turn?n=1&wait={wait}", sid))
        if root.find("Gather") is not None:
            picked = root
            break
    assert picked is not None and picked.find("Gather/Say").text == "Here is the slow answer."
    assert len(fake_openai.chat_requests()) == 1


def test_twilio_retry_of_a_turn_webhook_is_one_turn_with_the_same_reply(client, live, fake_openai):
    sid = _call_sid()
    a = _twiml(_post(client, "/channels/twilio/voice/turn?n=1", sid, SpeechResult="hello"))
    b = _twiml(_post(client, "/channels/twilio/voice/turn?n=1", sid, SpeechResult="hello"))
    assert a.find("Gather/Say").text == b.find("Gather/Say").text == "echo: hello"
    settle(live)
    assert len(fake_openai.chat_requests()) == 1
    assert metric(client, 'switchboard_duplicate_messages_total{channel="twilio_voice"}') == 1


def test_silence_reprompts_once_then_hangs_up_politely(client):
    sid = _call_sid()
    first = _twiml(_post(client, "/channels/twilio/voice/turn?n=1&quiet=1", sid))
    assert first.find("Gather/Say").text == "Sorry, I didn't catch that. How can I help?"
    assert first.find("Gather").get("action") == TURN + "?n=1"
    assert first.find("Redirect").text == TURN + "?n=1&quiet=2"
    second = _twiml(_post(client, "/channels/twilio/voice/turn?n=1&quiet=2", sid))
    assert [el.tag for el in second] == ["Say", "Hangup"]
    assert "Goodbye" in second.find("Say").text


def test_call_completed_status_ends_the_conversation(client, live, stored):
    sid = _call_sid()
    _post(client, "/channels/twilio/voice/turn?n=1", sid, SpeechResult="hi")
    settle(live)
    resp = _post(client, "/channels/twilio/voice/status", sid, CallStatus="completed", CallDuration="42")
    assert resp.status_code == 204
    conv_id = stored.messages(f"phone:{vendors.CALLER}")[0].conversation_id
    conv = wait_until(lambda: live.services.store and _conversation(stored, conv_id), what="conversation")
    assert conv["ended_at"] is not None and conv["end_reason"] == "call_ended"
    assert _abandoned(client) == (0, [])  # the reply was spoken before the caller hung up


def _abandoned(client) -> tuple[int, list[str]]:
    """The insight count of abandoned conversations today, and the conversation list's abandoned ones."""
    admin = {"Authorization": "Bearer admin-secret"}
    count = client.get("/api/insights", headers=admin).json()["abandoned"]
    listed = client.get("/api/conversations", params={"outcome": "abandoned"}, headers=admin).json()
    return count, [row["id"] for row in listed["conversations"]]


@pytest.mark.parametrize("hang_up", ["while_the_turn_runs", "after_the_reply_is_written"])
def test_a_caller_who_hangs_up_before_the_reply_is_spoken_abandoned_the_conversation(
        short_deadline, client, live, stored, fake_openai, hang_up):
    fake_openai.script_reply("Here is the slow answer.", delay_s=0.8)
    sid = _call_sid()
    first = _twiml(_post(client, "/channels/twilio/voice/turn?n=1", sid, SpeechResult="something slow"))
    assert first.find("Say").text == "One moment please."  # the answer is pending
    if hang_up == "after_the_reply_is_written":
        settle(live)  # the turn is over: its reply waits for the next webhook, which never comes
    _post(client, "/channels/twilio/voice/status", sid, CallStatus="completed", CallDuration="3")
    settle(live)
    conv_id = stored.messages(f"phone:{vendors.CALLER}")[0].conversation_id
    assert wait_until(lambda: _abandoned(client)[0], 5, "the abandoned count") == 1
    assert _abandoned(client) == (1, [conv_id])


def _conversation(stored, conv_id: str) -> dict:
    import json

    return json.loads(stored.redis.get(stored.services.store.key("conv", conv_id)))


@pytest.mark.parametrize("path", ["/channels/twilio/voice", "/channels/twilio/voice/turn?n=1",
                                  "/channels/twilio/voice/status"])
def test_unsigned_voice_webhooks_are_refused(path, client, stored, fake_openai):
    params = vendors.call_params(_call_sid(), SpeechResult="hi")
    resp = vendors.post_twilio(client, path, params, token="wrong-token")
    assert resp.status_code == 403 and stored.keys("msg:*") == [] and fake_openai.chat_requests() == []

"""Phone calls over Twilio ConversationRelay: a signed WebSocket, replies streamed as spoken tokens while
the model writes, barge-in that stores only what the caller heard, and a transfer to a person."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from websockets.exceptions import InvalidStatus

from gateway.core.models import Role
from tests.channels import vendors
from tests.channels.relay_client import CALL_SID, incoming_call, open_url, relay_url_of, signature
from tests.channels.relay_client import prompt as _prompt
from tests.channels.relay_client import setup as _setup
from tests.channels.relay_client import socket as _socket
from tests.channels.relay_client import tokens as _tokens

ADMIN = {"Authorization": "Bearer admin-secret"}
HANDOFF_NUMBER = "+15550001111"
TOUR = {"source": "guided-tours", "title": "Guided tours", "facts": ["coastal tour Saturdays 10:30, 40 euros"],
        "summary": "Our guided coastal tour leaves every Saturday at 10:30 and costs 40 euros."}
REPLY = ("Yes! Our **guided coastal tour** leaves every Saturday at 10:30 [1]. It takes about three hours, "
         "covers easy flat paths and costs 40 euros with the bike and the guide included.")


@pytest.fixture
def channel_overrides() -> dict:
    # hybrid retrieval: no selection call takes the scripted replies (the fake model answers in order)
    return {"twilio_voice_mode": "relay", "twilio_handoff_number": HANDOFF_NUMBER, "retrieval_strategy": "hybrid"}


def test_the_voice_webhook_connects_the_call_to_the_relay(client):
    answer = vendors.post_twilio(client, "/channels/twilio/voice", vendors.call_params(CALL_SID))
    assert answer.status_code == 200
    assert '<Connect action="https://bot.example.com/channels/twilio/voice/relay-ended" method="POST">' in answer.text
    assert relay_url_of(answer.text).startswith("wss://bot.example.com/channels/twilio/relay?ticket=")
    assert 'interruptible="any"' in answer.text
    assert f'<Parameter name="caller" value="{vendors.CALLER}" />' in answer.text


def test_an_unsigned_or_wrongly_signed_upgrade_is_refused(live, fake_openai):
    with pytest.raises(InvalidStatus):
        with _socket(live, signed=False):
            pass
    url = incoming_call(live)
    with pytest.raises(InvalidStatus):
        open_url(live, url, {"X-Twilio-Signature": signature(url, "not-the-token")})
    assert fake_openai.chat_requests() == []


def test_tokens_stream_while_the_model_writes_and_carry_the_knowledge(live, client, fake_openai, stored):
    assert client.post("/api/kb/topics", json=TOUR, headers=ADMIN).status_code == 201
    fake_openai.chunk_chars, fake_openai.chunk_delay_s = 8, 0.03
    fake_openai.script_reply(REPLY)
    with _socket(live) as ws:
        _setup(ws)
        ws.send(json.dumps({"type": "wat"}))  # logged and ignored, never fatal
        _prompt(ws, "Do you offer guided tours?")
        got = _tokens(ws)
    texts = [m for _, m in got if m["type"] == "text"]
    assert len(texts) > 5 and texts[-1]["last"] is True and not any(m["last"] for m in texts[:-1])
    streaming_s = len(REPLY) / 8 * 0.03
    assert got[-1][0] - got[0][0] > streaming_s / 2, "the first token came only after the model finished"
    spoken = "".join(m["token"] for m in texts)
    assert "guided coastal tour" in spoken and "**" not in spoken and "[1]" not in spoken
    assert all(not m["token"] or m["token"][-1].isspace() for m in texts[:-1])  # whole words only
    prompt = json.dumps(fake_openai.chat_requests()[-1]["body"]["messages"])
    assert "leaves every Saturday at 10:30" in prompt  # the knowledge base's answer reached the model
    agent = [m for m in stored.messages(f"phone:{vendors.CALLER}") if m.role == Role.AGENT]
    assert agent and "guided coastal tour" in agent[-1].text


def test_an_interrupt_stops_the_tokens_and_stores_what_was_heard(live, fake_openai, stored):
    fake_openai.chunk_chars, fake_openai.chunk_delay_s = 6, 0.05
    fake_openai.script_reply(REPLY)
    fake_openai.script_reply("Sure, the shop is at the harbour.")
    with _socket(live) as ws:
        _setup(ws)
        _prompt(ws, "Tell me about your tours")
        first = []
        while len(first) < 3:
            first.append(json.loads(ws.recv(timeout=10)))
        heard = "".join(m["token"] for m in first)
        ws.send(json.dumps({"type": "interrupt", "utteranceUntilInterrupt": heard, "durationUntilInterruptMs": 900}))
        cut_at = time.monotonic()
        late = _tokens(ws, until_last=False, timeout=0.6)
        assert [m for t, m in late if t - cut_at > 0.2] == []  # nothing more after 200 ms
        _prompt(ws, "Where is the shop?")
        after = _tokens(ws)
    assert "".join(m["token"] for _, m in after if m["type"] == "text").strip() == "Sure, the shop is at the harbour."
    agent = [m.text for m in stored.messages(f"phone:{vendors.CALLER}") if m.role == Role.AGENT]
    assert agent[-2] == heard and agent[-1] == "Sure, the shop is at the harbour."


def test_asking_for_a_person_ends_the_relay_and_dials_the_number(live, client, fake_openai, stored):
    with _socket(live) as ws:
        _setup(ws)
        _prompt(ws, "Can I talk to a person?")
        got = _tokens(ws, until_last=False, timeout=10)
    assert got[-1][1]["type"] == "end" and json.loads(got[-1][1]["handoffData"])["reasonCode"] == "live-agent-handoff"
    assert fake_openai.chat_requests() == []  # the handoff phrase needs no model
    ended = vendors.post_twilio(client, "/channels/twilio/voice/relay-ended",
                                {**vendors.call_params(CALL_SID), "HandoffData": got[-1][1]["handoffData"]})
    whisper = "https://bot.example.com/channels/twilio/voice/whisper?call=" + CALL_SID
    assert f'<Dial><Number method="POST" url="{whisper}">{HANDOFF_NUMBER}</Number></Dial>' in ended.text
    conversation = stored.messages(f"phone:{vendors.CALLER}")[-1].conversation_id
    shown = httpx.get(f"{live.url}/api/conversations/{conversation}", headers=ADMIN, timeout=10).json()
    assert shown["handoff"]["status"] == "waiting" and "person" in shown["handoff"]["reason"]
    assert [m["text"] for m in shown["messages"]][0] == "Can I talk to a person?"

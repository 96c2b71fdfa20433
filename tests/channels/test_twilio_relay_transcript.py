"""A relay call's transcript holds every prompt and every answer: a request for a person with no number
to transfer to and its "no one is available" answer too, and a reply the caller cut off is stored as
what they heard and marked ``interrupted``, not ``delivered`` (issue 39, item 7)."""

from __future__ import annotations

import json

import httpx
import pytest

from gateway.core.models import DeliveryStatus, Role
from tests.channels import vendors
from tests.channels.conftest import wait_until
from tests.channels.relay_client import prompt, setup, socket, tokens

ADMIN = {"Authorization": "Bearer admin-secret"}
REPLY = ("Our guided coastal tour leaves every Saturday at half past ten from the harbour. It takes about three "
         "hours on easy flat paths and costs forty euros with the bike and the guide included.")


@pytest.fixture
def channel_overrides() -> dict:
    return {"twilio_voice_mode": "relay", "twilio_handoff_number": None, "retrieval_strategy": "hybrid"}


def _shown(live, stored) -> list[dict]:
    """The conversation's messages as the API (and the console) show them."""
    conversation = stored.messages(f"phone:{vendors.CALLER}")[-1].conversation_id
    answer = httpx.get(f"{live.url}/api/conversations/{conversation}", headers=ADMIN, timeout=10)
    return [{"role": m["role"], "text": m["text"], "delivery": m["delivery"]} for m in answer.json()["messages"]]


def test_asking_for_a_person_with_no_number_is_in_the_transcript_and_the_memory(live, channel_settings,
                                                                                  fake_openai, stored):
    unavailable = channel_settings.twilio_handoff_unavailable
    fake_openai.script_reply("The shop is at the harbour.")
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "Can I talk to a person?")
        assert [m for _, m in tokens(ws)] == [{"type": "text", "token": unavailable, "last": True}]
        prompt(ws, "Where is the shop?")
        assert "".join(m["token"] for _, m in tokens(ws)).strip() == "The shop is at the harbour."
    wait_until(lambda: len(stored.messages(f"phone:{vendors.CALLER}")) == 4, what="four messages stored")
    assert _shown(live, stored) == [
        {"role": "user", "text": "Can I talk to a person?", "delivery": None},
        {"role": "agent", "text": unavailable, "delivery": "delivered"},
        {"role": "user", "text": "Where is the shop?", "delivery": None},
        {"role": "agent", "text": "The shop is at the harbour.", "delivery": "delivered"},
    ]
    requests = fake_openai.chat_requests()
    assert len(requests) == 1  # "no one is available" needs no model
    history = [(m["role"], m["content"]) for m in requests[0]["body"]["messages"][1:]]
    assert history == [("user", "Can I talk to a person?"), ("assistant", unavailable),
                       ("user", "Where is the shop?")]


def test_a_reply_cut_off_by_the_caller_is_marked_interrupted_and_a_whole_one_delivered(live, fake_openai, stored):
    fake_openai.chunk_chars, fake_openai.chunk_delay_s = 6, 0.05
    fake_openai.script_reply(REPLY)
    fake_openai.script_reply("Sure, the shop is at the harbour.")
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "Tell me about your tours")
        heard = "".join(json.loads(ws.recv(timeout=10))["token"] for _ in range(3))
        ws.send(json.dumps({"type": "interrupt", "utteranceUntilInterrupt": heard, "durationUntilInterruptMs": 900}))
        tokens(ws, until_last=False, timeout=0.5)
        prompt(ws, "Where is the shop?")
        tokens(ws)
    wait_until(lambda: len(stored.messages(f"phone:{vendors.CALLER}")) == 4, what="four messages stored")
    agent = [m for m in stored.messages(f"phone:{vendors.CALLER}") if m.role == Role.AGENT]
    assert [(m.text, m.delivery) for m in agent] == [(heard, DeliveryStatus.INTERRUPTED),
                                                     ("Sure, the shop is at the harbour.", DeliveryStatus.DELIVERED)]
    assert [m["delivery"] for m in _shown(live, stored) if m["role"] == "agent"] == ["interrupted", "delivered"]
    assert len(heard) < len(REPLY) / 2
    insights = httpx.get(f"{live.url}/api/insights", headers=ADMIN, timeout=10).json()
    assert insights["abandoned"] == 0  # a barge-in is a conversation going on, not a caller leaving

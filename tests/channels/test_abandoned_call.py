"""The abandoned outcome on a relay call: a caller who hangs up while the answer is being spoken left
mid-answer (counted once); a caller who barges in and goes on talking did not."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.channels import vendors
from tests.channels.conftest import wait_until
from tests.channels.relay_client import prompt, setup, socket, tokens

ADMIN = {"Authorization": "Bearer admin-secret"}
REPLY = ("Our guided coastal tour leaves every Saturday at half past ten from the harbour. It takes about three "
         "hours on easy flat paths and costs forty euros with the bike and the guide included.")


@pytest.fixture
def channel_overrides() -> dict:
    return {"twilio_voice_mode": "relay", "twilio_handoff_number": None}


def _report(live) -> dict:
    return httpx.get(f"{live.url}/api/insights", headers=ADMIN, timeout=10).json()


def test_a_caller_who_barges_in_has_not_left_one_who_hangs_up_has(live, fake_openai, stored):
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
    wait_until(lambda: _report(live)["turns"] == 2, what="two turns counted")
    assert _report(live)["abandoned"] == 0  # a barge-in is a conversation, not a caller leaving

    fake_openai.script_reply(REPLY)
    with socket(live, call_sid="CA" + "7" * 32) as ws:
        setup(ws, call_sid="CA" + "7" * 32)
        prompt(ws, "Tell me about your tours")
        json.loads(ws.recv(timeout=10))  # the first words are spoken, then the caller hangs up
    wait_until(lambda: _report(live)["turns"] == 3, what="the third turn counted")
    assert _report(live)["abandoned"] == 1
    assert stored.messages(f"phone:{vendors.CALLER}")[-1].delivery.value == "interrupted"

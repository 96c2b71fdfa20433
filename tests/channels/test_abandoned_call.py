"""The abandoned outcome on a relay call: a caller who hangs up while the answer is being spoken left
mid-answer. (A caller who barges in and goes on talking did not: test_twilio_relay_transcript.py.)"""

from __future__ import annotations

import json

import httpx
import pytest

from tests.channels import vendors
from tests.channels.conftest import wait_until
from tests.channels.relay_client import prompt, setup, socket

ADMIN = {"Authorization": "Bearer admin-secret"}
REPLY = ("Our guided coastal tour leaves every Saturday at half past ten from the harbour. It takes about three "
         "hours on easy flat paths and costs forty euros with the bike and the guide included.")


@pytest.fixture
def channel_overrides() -> dict:
    return {"twilio_voice_mode": "relay", "twilio_handoff_number": None}


def _report(live) -> dict:
    return httpx.get(f"{live.url}/api/insights", headers=ADMIN, timeout=10).json()


def test_a_caller_who_hangs_up_mid_answer_has_left(live, fake_openai, stored):
    fake_openai.chunk_chars, fake_openai.chunk_delay_s = 6, 0.05
    fake_openai.script_reply(REPLY)
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "Tell me about your tours")
        json.loads(ws.recv(timeout=10))  # the first words are spoken, then the caller hangs up
    wait_until(lambda: _report(live)["turns"] == 1, what="the turn counted")
    assert _report(live)["abandoned"] == 1
    [_, reply] = stored.messages(f"phone:{vendors.CALLER}")
    assert reply.delivery.value == "interrupted" and len(reply.text) < len(REPLY)

"""A relay call whose caller asks for a person when no handoff number is set: the agent says no one is
available and the call goes on; a relay session that ends without handoff data hangs up."""

from __future__ import annotations

import json

import pytest

from tests.channels import vendors
from tests.channels.relay_client import CALL_SID
from tests.channels.relay_client import prompt as _prompt
from tests.channels.relay_client import setup as _setup
from tests.channels.relay_client import socket as _socket
from tests.channels.relay_client import tokens as _tokens


@pytest.fixture
def channel_overrides() -> dict:
    return {"twilio_voice_mode": "relay", "twilio_handoff_number": None, "retrieval_strategy": "hybrid"}


def test_without_a_number_the_agent_says_no_one_is_available_and_goes_on(live, channel_settings, fake_openai):
    fake_openai.script_reply("The shop is at the harbour.")
    with _socket(live) as ws:
        _setup(ws)
        _prompt(ws, "Can I talk to a person?")
        unavailable = _tokens(ws)
        _prompt(ws, "Where is the shop?")
        after = _tokens(ws)
    assert [m for _, m in unavailable] == [{"type": "text", "token": channel_settings.twilio_handoff_unavailable,
                                            "last": True}]
    assert "".join(m["token"] for _, m in after).strip() == "The shop is at the harbour."


def test_the_end_of_a_relay_session_without_handoff_data_hangs_up(client):
    ended = vendors.post_twilio(client, "/channels/twilio/voice/relay-ended", vendors.call_params(CALL_SID))
    assert "<Hangup />" in ended.text and "<Dial" not in ended.text
    again = vendors.post_twilio(client, "/channels/twilio/voice/relay-ended",
                                {**vendors.call_params(CALL_SID), "HandoffData": json.dumps({"reason": "x"})})
    # No number to dial: the caller hears that no one is available and stays with the agent.
    assert "<Dial" not in again.text and "<ConversationRelay" in again.text and "no one is available" in again.text

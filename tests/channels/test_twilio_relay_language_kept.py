"""A call whose relay session ends for a person when no one can take it goes back to the agent in a new relay
session: that session starts in the language the caller was heard speaking (kept with the call in Redis),
its greeting says so in that language, and the agent goes on answering in it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from channels.twilio.handoff_phrasebook import PHRASEBOOK
from tests.channels import vendors
from tests.channels.relay_client import CALL_SID, open_url, prompt, relay_url_of, setup, signature, socket, tokens


@pytest.fixture
def channel_overrides() -> dict:
    return {"twilio_voice_mode": "relay", "twilio_handoff_number": None, "retrieval_strategy": "hybrid",
            "twilio_relay_languages": "en-US,es-ES", "handoff_phrases": "hablar con una persona"}


def _back_to_the_agent(client, call_sid: str = CALL_SID) -> ET.Element:
    ended = vendors.post_twilio(client, "/channels/twilio/voice/relay-ended",
                                {**vendors.call_params(call_sid), "HandoffData": json.dumps({"reason": "x"})})
    return ET.fromstring(ended.text).find("Connect/ConversationRelay"), relay_url_of(ended.text)


def test_the_agents_new_session_goes_on_in_the_callers_language(live, client, fake_openai):
    fake_openai.script_reply("Abrimos a las nueve.")
    fake_openai.script_reply("De nada, hasta luego.")
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "Hola, ¿a qué hora abren mañana?")
        assert tokens(ws)[0][1]["type"] == "language"

    relay, url = _back_to_the_agent(client)
    assert relay.get("language") == "es-ES"
    assert relay.get("welcomeGreeting") == PHRASEBOOK["es"][1]
    with open_url(live, url, {"X-Twilio-Signature": signature(url)}) as ws:
        setup(ws)
        prompt(ws, "Vale, gracias.")  # too little to tell a language by: the call's is kept, not detected again
        got = [m for _, m in tokens(ws)]
    assert {m["type"] for m in got} == {"text"}  # already in Spanish: no switch
    system = fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]
    assert "The customer speaks Spanish: answer in Spanish." in system


def test_a_call_whose_language_was_never_detected_goes_back_in_the_lines_language(client, channel_settings):
    relay, _ = _back_to_the_agent(client, "CA" + "7" * 32)
    assert relay.get("language") == "en-US"
    assert relay.get("welcomeGreeting") == channel_settings.twilio_handoff_unavailable


def test_a_spanish_caller_asking_for_a_person_hears_in_spanish_that_no_one_is_available(live, fake_openai):
    fake_openai.script_reply("La tienda está en el puerto.")
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "Hola, ¿puedo hablar con una persona, por favor?")
        unavailable = [m for _, m in tokens(ws)]
    assert unavailable[0]["type"] == "language"
    assert unavailable[1:] == [{"type": "text", "token": PHRASEBOOK["es"][1], "last": True}]
    assert fake_openai.chat_requests() == []  # no model call

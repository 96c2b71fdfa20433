"""A relay caller whose language was detected hears a handoff in that language: the model's own words when
it wrote some, else the default handoff message translated (``channels.twilio.handoff_phrasebook``). A
message the operator wrote is said as written."""

from __future__ import annotations

import json

import httpx
import pytest

from channels.twilio.handoff_phrasebook import PHRASEBOOK, handoff_message, handoff_unavailable
from gateway.core.models import Role
from tests.channels import vendors
from tests.channels.relay_client import prompt, setup, socket, tokens

SPANISH_HANDOFF, _ = PHRASEBOOK["es"]
ADMIN = {"Authorization": "Bearer admin-secret"}


@pytest.fixture
def channel_overrides() -> dict:
    return {"twilio_voice_mode": "relay", "twilio_handoff_number": "+15550001111", "retrieval_strategy": "hybrid",
            "twilio_relay_languages": "en-US,de-DE,es-ES", "handoff_phrases": "hablar con una persona"}


def _until_end(ws) -> tuple[str, list[dict]]:
    got = [m for _, m in tokens(ws, until_last=False, timeout=10)]
    return "".join(m["token"] for m in got if m["type"] == "text").strip(), got


def test_a_spanish_caller_asking_for_a_person_hears_the_handoff_in_spanish(live, fake_openai, stored):
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "Hola, ¿puedo hablar con una persona, por favor?")
        said, got = _until_end(ws)
    assert got[0]["type"] == "language" and got[-1]["type"] == "end"
    assert said == SPANISH_HANDOFF
    agent = [m.text for m in stored.messages(f"phone:{vendors.CALLER}") if m.role == Role.AGENT]
    assert agent == [SPANISH_HANDOFF]  # the transcript keeps what the caller heard


def test_a_model_handoff_says_the_models_words_or_else_the_translated_message(live, fake_openai):
    fake_openai.script_reply("Abrimos a las nueve.")
    fake_openai.script_reply("[HANDOFF]")
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "Hola, ¿a qué hora abren mañana?")
        tokens(ws)
        prompt(ws, "¿Y el precio del alquiler del barco?")
        said, got = _until_end(ws)
    assert said == SPANISH_HANDOFF and got[-1]["type"] == "end"
    assert json.loads(got[-1]["handoffData"])["reason"] == "the model asked for a person"

    fake_openai.script_reply("Un momento, le paso con mi compañera Ana. [HANDOFF]")
    other_call, other_caller = "CA" + "5" * 32, "+15550009999"  # the first caller waits for a person now
    with socket(live, other_call, other_caller) as ws:
        setup(ws, other_call, other_caller)
        prompt(ws, "Hola, ¿cuánto cuesta el barco por un día?")
        said, got = _until_end(ws)
    assert said == "Un momento, le paso con mi compañera Ana." and got[-1]["type"] == "end"


def test_the_operators_own_message_and_the_lines_language_are_said_as_configured(settings):
    custom = settings.model_copy(update={"handoff_message": "Einen Moment bitte.", "voice_language": "en-US"})
    assert handoff_message(custom, "de-DE") == "Einen Moment bitte."  # the operator's words, untouched
    assert handoff_message(settings, "de-DE") == PHRASEBOOK["de"][0]
    assert handoff_message(settings, "en-GB") == settings.handoff_message  # the line's own language
    assert handoff_message(settings, None) == settings.handoff_message  # not known
    assert handoff_message(settings, "ja-JP") == settings.handoff_message  # no translation at hand
    assert handoff_unavailable(settings, "fr-FR") == PHRASEBOOK["fr"][1]
    assert PHRASEBOOK["en"] == (settings.handoff_message, settings.twilio_handoff_unavailable)


def test_a_handoff_by_the_tool_without_words_of_the_model_is_said_translated(live, channel_settings, fake_openai):
    agent = httpx.patch(f"{live.url}/v1/agents/{channel_settings.agent_id}", headers=ADMIN, timeout=10,
                        json={"config": {"tools": [{"name": "handoff"}]}})
    assert agent.status_code == 200, agent.text
    fake_openai.script_tool_calls(("handoff", {"reason": "a damaged boat"}))
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "Hola, el barco que alquilé tiene una avería, ¿qué hago?")
        said, got = _until_end(ws)
    assert said == SPANISH_HANDOFF and got[-1]["type"] == "end"
    assert json.loads(got[-1]["handoffData"])["reason"] == "the model called the handoff tool: a damaged boat"

"""A relay call's keypad, languages and warm transfer (issue 44, item 5): keys reach the turn as
``[pressed 2]``, a caller speaking Spanish switches the call (a ``language`` message) and the model is told
to answer in Spanish, and a transfer whispers the call's summary to the operator before the caller is
connected, the console showing it with the handoff. Every call starts with the disclosure."""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET

import httpx
import pytest
from pydantic import SecretStr

from gateway.core.models import Role
from tests.admin_ui.conftest import PASSWORD
from tests.channels import vendors
from tests.channels.relay_client import CALL_SID, prompt, setup, socket, tokens
from tests.channels.test_handoff import console  # noqa: F401  (a fixture: the signed-in console)

ADMIN = {"Authorization": "Bearer admin-secret"}
HANDOFF_NUMBER = "+15550001111"
DISCLOSURE = "You are speaking with an automated assistant; this call may be recorded."
WHISPER = vendors.PUBLIC_URL + f"/channels/twilio/voice/whisper?call={CALL_SID}"


@pytest.fixture
def channel_overrides() -> dict:
    return {"twilio_voice_mode": "relay", "twilio_handoff_number": HANDOFF_NUMBER, "retrieval_strategy": "hybrid",
            "twilio_relay_languages": "en-US,de-DE,es-ES", "twilio_relay_dtmf_window_s": 0.3,
            "twilio_greeting_disclosure": DISCLOSURE, "admin_password": SecretStr(PASSWORD), "admin_user": "root"}


def _press(ws, *keys: str) -> None:
    for key in keys:
        ws.send(json.dumps({"type": "dtmf", "digit": key}))


def _spoken(got: list[tuple[float, dict]]) -> str:
    return "".join(m["token"] for _, m in got if m["type"] == "text").strip()


def test_the_call_starts_with_the_disclosure_and_may_press_keys_and_switch_languages(client):
    answer = vendors.post_twilio(client, "/channels/twilio/voice", vendors.call_params(CALL_SID))
    relay = ET.fromstring(answer.text).find("Connect/ConversationRelay")
    assert relay.get("welcomeGreeting") == f"{DISCLOSURE} Hello! How can I help you today?"
    assert relay.get("dtmfDetection") == "true" and relay.get("language") == "en-US"
    assert [language.get("code") for language in relay.findall("Language")] == ["en-US", "de-DE", "es-ES"]


def test_keys_the_caller_presses_reach_the_turn_as_text(live, fake_openai, stored):
    fake_openai.script_reply("Our opening hours are nine to six, every day.")
    with socket(live) as ws:
        setup(ws)
        _press(ws, "2")
        first = tokens(ws)
        _press(ws, "4", "4", "1", "x")  # within the window: one entry; "x" is no phone key
        second = tokens(ws)
    assert _spoken(first) == "Our opening hours are nine to six, every day."
    assert _spoken(second) == "echo: [pressed 4 4 1]"
    requests = [r["body"]["messages"] for r in fake_openai.chat_requests()]
    assert requests[0][-1] == {"role": "user", "content": "[pressed 2]"}  # the model saw the key
    assert 'keys the caller presses arrive as "[pressed 1]"' in requests[0][0]["content"]
    users = [m.text for m in stored.messages(f"phone:{vendors.CALLER}") if m.role == Role.USER]
    assert users == ["[pressed 2]", "[pressed 4 4 1]"]


def test_a_caller_speaking_spanish_switches_the_call_and_is_answered_in_spanish(live, fake_openai):
    fake_openai.script_reply("Abrimos mañana a las nueve.")
    fake_openai.script_reply("Sí, tenemos bicicletas eléctricas.")
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "Hola, ¿a qué hora abren mañana?")  # recognition is still en-US: Twilio says lang en-US
        first = [m for _, m in tokens(ws)]
        prompt(ws, "¿Tienen bicicletas eléctricas?")
        second = [m for _, m in tokens(ws)]
    assert first[0] == {"type": "language", "ttsLanguage": "es-ES", "transcriptionLanguage": "es-ES"}
    assert _spoken([(0, m) for m in first]) == "Abrimos mañana a las nueve."
    assert [m["type"] for m in second] == ["text"] * len(second)  # switched once
    systems = [r["body"]["messages"][0]["content"] for r in fake_openai.chat_requests()]
    assert all("The customer speaks Spanish: answer in Spanish." in system for system in systems)


def test_an_english_caller_stays_in_english(live, fake_openai):
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "What time do you open tomorrow?")
        got = [m for _, m in tokens(ws)]
    assert {m["type"] for m in got} == {"text"}
    assert "answer in English" in fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]


def test_a_transfer_whispers_the_summary_to_the_operator_and_the_console_shows_it(live, client, console,  # noqa: F811
                                                                                 fake_openai, stored):
    fake_openai.script_reply("E-bikes are 35 euros a day, helmet included.")
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "Do you rent e-bikes for a day?")
        tokens(ws)
        prompt(ws, "Can I talk to a person?")
        end = tokens(ws, until_last=False, timeout=10)[-1][1]
    assert end["type"] == "end"
    data = json.loads(end["handoffData"])
    assert data["reasonCode"] == "live-agent-handoff"
    assert data["summary"] == (f"Caller {vendors.CALLER} asked about \u201cDo you rent e-bikes for a day?\u201d; the "
                               "assistant last said \u201cE-bikes are 35 euros a day, helmet included.\u201d")
    assert data["question"] == "Their question: \u201cDo you rent e-bikes for a day?\u201d"

    ended = vendors.post_twilio(client, "/channels/twilio/voice/relay-ended",
                                {**vendors.call_params(CALL_SID), "HandoffData": end["handoffData"]})
    number = ET.fromstring(ended.text).find("Dial/Number")
    assert (number.text, number.get("url"), number.get("method")) == (HANDOFF_NUMBER, WHISPER, "POST")
    # the operator's leg answers: Twilio asks the <Number url> what to play before bridging the caller
    leg = vendors.call_params("CA" + "2" * 32, To=HANDOFF_NUMBER, Direction="outbound-dial", ParentCallSid=CALL_SID)
    whisper = vendors.post_twilio(client, WHISPER.removeprefix(vendors.PUBLIC_URL), leg)
    said = ET.fromstring(whisper.text).find("Say").text
    assert said == f"{data['summary']} {data['question']}"

    conversation = stored.messages(f"phone:{vendors.CALLER}")[-1].conversation_id
    shown = httpx.get(f"{live.url}/api/conversations/{conversation}", headers=ADMIN, timeout=10).json()
    assert shown["handoff"]["summary"] == f"{data['summary']}\n{data['question']}"
    page = html.unescape(console.get(f"/admin/conversations/{conversation}").text)
    assert f"{data['summary']}<br>{data['question']}" in page


def test_the_whisper_says_nothing_for_a_call_it_has_no_summary_of(client):
    leg = vendors.call_params("CA" + "3" * 32, To=HANDOFF_NUMBER)
    whisper = vendors.post_twilio(client, "/channels/twilio/voice/whisper?call=CA" + "9" * 32, leg)
    assert whisper.status_code == 200 and list(ET.fromstring(whisper.text)) == []
    unsigned = client.post("/channels/twilio/voice/whisper?call=" + CALL_SID, data=leg)
    assert unsigned.status_code == 403

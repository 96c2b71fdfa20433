"""Twilio SMS specifics: empty TwiML at once, STOP/START/HELP, signatures against the public URL."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from gateway.core.models import Role
from tests.channels import vendors
from tests.channels.conftest import settle
from tests.fakes import twilio_api

EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response />'


def _sms(client, body: str, **kw):
    return vendors.post_twilio(client, "/channels/twilio/sms", vendors.sms_params(body, **kw))


def test_webhook_answers_empty_twiml_and_the_reply_goes_through_the_rest_api(client, live, fake_twilio, fake_openai):
    fake_openai.script_reply("We open at 9.", delay_s=0.5)
    started = time.monotonic()
    resp = _sms(client, "When do you open?")
    assert time.monotonic() - started < 0.4
    assert resp.text == EMPTY_TWIML and resp.headers["content-type"].startswith("application/xml")
    settle(live)
    [sent] = fake_twilio.messages()
    assert sent == {"To": vendors.CALLER, "From": twilio_api.FROM_NUMBER, "Body": "We open at 9."}


def test_markdown_is_stripped_for_sms(client, live, fake_twilio, fake_openai):
    fake_openai.script_reply("**Open** 9-5. Details: [hours](https://example.com/hours)")
    _sms(client, "hours?")
    settle(live)
    assert fake_twilio.sent_texts() == ["Open 9-5. Details: hours (https://example.com/hours)"]


def test_stop_silences_the_number_until_start(client, live, fake_twilio, fake_openai, stored):
    assert _sms(client, "STOP").text == EMPTY_TWIML
    assert _sms(client, "are you there?").text == EMPTY_TWIML
    time.sleep(0.2)
    settle(live)
    assert fake_twilio.messages() == [] and fake_openai.chat_requests() == []
    assert stored.messages(f"phone:{vendors.CALLER}") == []
    start = _sms(client, "start")
    assert "<Message>" in start.text and live.services.settings.sms_resubscribed_message in start.text
    _sms(client, "are you there now?")
    settle(live)
    assert fake_twilio.sent_texts() == ["echo: are you there now?"]


def test_stop_during_a_turn_wins_over_its_reply(client, live, fake_twilio, fake_openai):
    fake_openai.script_reply("a reply nobody wants", delay_s=0.6)
    _sms(client, "question")
    _sms(client, "Stop")
    settle(live)
    assert fake_twilio.messages() == []


def test_help_is_answered_in_twiml(client, live, fake_twilio, fake_openai):
    resp = _sms(client, "HELP")
    assert "<Message>" in resp.text and "STOP" in resp.text
    assert fake_openai.chat_requests() == [] and fake_twilio.messages() == []


def test_signature_is_checked_against_the_public_url_not_the_host_header(client, stored):
    params = vendors.sms_params("hi")
    from twilio.request_validator import RequestValidator

    local = RequestValidator(twilio_api.AUTH_TOKEN).compute_signature(str(client.base_url) + "/channels/twilio/sms",
                                                                       params)
    resp = client.post("/channels/twilio/sms", data=params, headers={"X-Twilio-Signature": local})
    assert resp.status_code == 403 and stored.keys("msg:*") == []


def test_sms_and_voice_from_one_number_are_one_persona(client, live, stored):
    _sms(client, "My name is Ada.")
    settle(live)
    vendors.post_twilio(client, "/channels/twilio/voice/turn?n=1",
                        vendors.call_params("CA" + "1" * 32, SpeechResult="What is my name?", Confidence="0.9"))
    settle(live)
    messages = stored.messages(f"phone:{vendors.CALLER}")
    assert [(m.channel, m.role) for m in messages] == [
        ("twilio_sms", Role.USER), ("twilio_sms", Role.AGENT),
        ("twilio_voice", Role.USER), ("twilio_voice", Role.AGENT)]
    assert len({m.persona_id for m in messages}) == 1


# What the first SMS send touches, in a fresh interpreter: twilio imports its REST resources lazily (~24 ms),
# which would land on the event loop inside the first burst's turns, in front of that burst's webhook acks.
FIRST_SEND = """
import asyncio, sys, types
from channels.twilio.rest import TwilioRest
from gateway.core.settings import Settings

async def main():
    loaded = set(sys.modules)
    settings = Settings(twilio_account_sid="AC" + "0" * 32, twilio_auth_token="t")
    rest = TwilioRest(types.SimpleNamespace(settings=settings))
    rest._rest().messages  # what send_sms reaches before its request
    await rest.close()
    print(sorted(m for m in set(sys.modules) - loaded if m.startswith("twilio")))

asyncio.run(main())
"""


def test_the_first_send_imports_no_twilio_module():
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", FIRST_SEND], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

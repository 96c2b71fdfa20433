"""The relay socket is bound to its call: a URL and signature captured from one call open nothing on
another call or a second time, and a ``setup`` naming another call or caller is refused before it can
read that caller's history (issue 38, items 1 and 2)."""

from __future__ import annotations

import json
import time

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from channels.twilio.relay import relay_url
from gateway.core.models import Role
from tests.channels import vendors
from tests.channels.conftest import metric, wait_until
from tests.channels.relay_client import (
    CALL_SID,
    incoming_call,
    open_url,
    prompt,
    setup,
    signature,
    socket,
    tokens,
)

OTHER_CALL, OTHER_CALLER = "CA" + "3" * 32, "+15557770003"
VICTIM = "+15550009999"
REFUSED_TICKET = 'switchboard_rejected_requests_total{channel="twilio_relay",reason="ticket"}'
REFUSED_SETUP = 'switchboard_rejected_requests_total{channel="twilio_relay",reason="setup"}'


@pytest.fixture
def channel_overrides() -> dict:
    return {"twilio_voice_mode": "relay", "retrieval_strategy": "hybrid", "twilio_relay_ticket_ttl_s": 1.0}


def _spoken(got: list[tuple[float, dict]]) -> str:
    return "".join(m["token"] for _, m in got if m["type"] == "text")


def _closed(ws, timeout: float = 5.0) -> ConnectionClosed:
    """The close the gateway sent (code and reason), once every message before it is read."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ws.recv(timeout=max(0.01, deadline - time.monotonic()))
        except ConnectionClosed as closed:
            return closed
        except TimeoutError:
            break
    raise AssertionError("the gateway did not close the socket")


def test_a_captured_url_and_signature_open_nothing_again_nor_on_another_call(live, client, fake_openai, stored):
    url = incoming_call(live)
    captured = {"X-Twilio-Signature": signature(url)}
    fake_openai.script_reply("The shop opens at nine.")
    with open_url(live, url, captured) as ws:  # the call itself: Twilio opens its URL once
        setup(ws)
        prompt(ws, "When do you open?")
        assert _spoken(tokens(ws)).strip() == "The shop opens at nine."
    refused = metric(client, REFUSED_TICKET)
    with pytest.raises(InvalidStatus):  # the same URL and header again: the ticket is used
        open_url(live, url, captured)
    fixed = relay_url(vendors.PUBLIC_URL)  # what the upgrade used to be signed over
    with pytest.raises(InvalidStatus):
        open_url(live, fixed, {"X-Twilio-Signature": signature(fixed)})
    other = incoming_call(live, OTHER_CALL, OTHER_CALLER)
    with pytest.raises(InvalidStatus):  # another call's URL with the captured header
        open_url(live, other, captured)
    assert metric(client, REFUSED_TICKET) == refused + 2
    assert len(fake_openai.chat_requests()) == 1  # no refused socket ran a turn
    with open_url(live, other, {"X-Twilio-Signature": signature(other)}) as ws:  # its own call still opens
        setup(ws, OTHER_CALL, OTHER_CALLER)
        prompt(ws, "Hello?")
        assert _spoken(tokens(ws)).strip() == "echo: Hello?"
    assert [m.text for m in stored.messages(f"phone:{OTHER_CALLER}") if m.role == Role.USER] == ["Hello?"]


def test_a_ticket_not_used_in_time_opens_nothing(live, client):
    url = incoming_call(live)
    time.sleep(1.3)  # the ticket lives SWITCHBOARD_TWILIO_RELAY_TICKET_TTL_S (1 s here)
    refused = metric(client, REFUSED_TICKET)
    with pytest.raises(InvalidStatus):
        socket(live, url=url)
    assert metric(client, REFUSED_TICKET) == refused + 1


def test_a_setup_naming_another_caller_is_refused_before_it_reads_their_history(live, client, fake_openai,
                                                                                  stored, caplog):
    fake_openai.script_reply("Noted.")
    sms = vendors.post_twilio(client, "/channels/twilio/sms", vendors.sms_params("my card PIN is 4321",
                                                                               sender=VICTIM))
    assert sms.status_code == 200
    wait_until(lambda: len(stored.messages(f"phone:{VICTIM}")) == 2, what="the victim's SMS turn")
    victim_messages = stored.messages(f"phone:{VICTIM}")
    requests = len(fake_openai.chat_requests())
    refused = metric(client, REFUSED_SETUP)
    with socket(live) as ws:  # the attacker's own call
        setup(ws, CALL_SID, VICTIM)
        prompt(ws, "What did I text you?")
        closed = _closed(ws)
    assert closed.rcvd.code == 1008 and "another call or caller" in closed.rcvd.reason
    with socket(live) as ws:  # the right caller but another call's id
        setup(ws, OTHER_CALL, vendors.CALLER)
        closed = _closed(ws)
    assert closed.rcvd.code == 1008
    assert metric(client, REFUSED_SETUP) == refused + 2
    logged = [r.getMessage() for r in caplog.records if r.name == "channels.twilio.relay"]
    assert any(f"relay setup refused: it names call {CALL_SID} and another caller" in line for line in logged)
    assert VICTIM not in "\n".join(logged)  # the claimed number is not written to the log
    time.sleep(0.3)
    assert len(fake_openai.chat_requests()) == requests  # no turn ran: the PIN reached no prompt
    assert "4321" not in json.dumps([r["body"]["messages"] for r in fake_openai.chat_requests()[requests:]])
    assert stored.messages(f"phone:{VICTIM}") == victim_messages
    assert stored.messages(f"phone:{vendors.CALLER}") == []

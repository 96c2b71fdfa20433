"""A relay socket is bounded: closed when it sends no ``setup`` or goes quiet, refused past the caps per
caller and in all, each with its close code and reason; a prompt longer than the message limit runs no
turn; a frame too big or nested too deep closes the socket cleanly (issue 38, items 1 and 6)."""

from __future__ import annotations

import json
import logging
import time

import pytest
from websockets.exceptions import ConnectionClosed

from gateway.core.models import Role
from tests.channels import vendors
from tests.channels.conftest import metric
from tests.channels.relay_client import prompt, setup, socket, tokens

REPLY = "Our guided coastal tour leaves every Saturday at half past ten from the harbour, rain or shine."
TOO_LONG = 'switchboard_rejected_requests_total{channel="twilio_relay",reason="too_long"}'


@pytest.fixture
def channel_overrides() -> dict:
    return {"twilio_voice_mode": "relay", "retrieval_strategy": "hybrid", "twilio_relay_setup_timeout_s": 0.4,
            "twilio_relay_idle_timeout_s": 0.8, "twilio_relay_max_sockets": 4,
            "twilio_relay_max_sockets_per_caller": 2}


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


def _call(n: int) -> str:
    return f"CA{n:032d}"


def test_a_socket_without_setup_or_gone_quiet_is_closed_but_not_while_it_speaks(live, fake_openai):
    with socket(live) as ws:
        started = time.monotonic()
        closed = _closed(ws)
    assert (closed.rcvd.code, closed.rcvd.reason) == (1008, "no setup within 0.4 s")
    assert 0.3 < time.monotonic() - started < 3
    fake_openai.chunk_chars, fake_openai.chunk_delay_s = 4, 0.05  # about 1.2 s of speech: past the idle limit
    fake_openai.script_reply(REPLY)
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "Tell me about the tours")
        got = tokens(ws)
        spoke_until = time.monotonic()
        closed = _closed(ws)
    assert "".join(m["token"] for _, m in got).strip() == REPLY and got[-1][1]["last"] is True
    assert got[-1][0] - got[0][0] > 0.8  # the reply outlasted the idle limit and was not cut
    assert (closed.rcvd.code, closed.rcvd.reason) == (1000, "idle for 0.8 s")
    assert time.monotonic() - spoke_until < 3


CAPS = {"twilio_voice_mode": "relay", "twilio_relay_setup_timeout_s": 2.0, "twilio_relay_max_sockets": 4,
        "twilio_relay_max_sockets_per_caller": 2}


@pytest.mark.parametrize("channel_overrides", [CAPS])
def test_sockets_past_the_caps_are_closed_with_the_reason_and_freed_ones_count_again(live):
    callers = ["+15550000101", "+15550000102", "+15550000103"]
    first = socket(live, _call(1), callers[0])
    second = socket(live, _call(2), callers[0])
    third = socket(live, _call(3), callers[0])
    closed = _closed(third)
    assert (closed.rcvd.code, closed.rcvd.reason) == (1013, "too many relay sockets for this caller (limit 2)")
    others = [socket(live, _call(4), callers[1]), socket(live, _call(5), callers[2])]
    fifth = socket(live, _call(6), callers[2])
    closed = _closed(fifth)
    assert (closed.rcvd.code, closed.rcvd.reason) == (1013, "too many relay sockets on this gateway (limit 4)")
    first.close()
    time.sleep(0.2)
    with socket(live, _call(7), callers[0]) as again:  # the freed place is taken again
        setup(again, _call(7), callers[0])
        prompt(again, "still there?")
        assert "".join(m["token"] for _, m in tokens(again)).strip() == "echo: still there?"
    for ws in (second, *others):
        assert _closed(ws).rcvd.code == 1008  # none sent setup: each closed by the setup deadline
    assert _closed(socket(live, _call(8), callers[0])).rcvd.code == 1008  # all released: room again


def test_a_prompt_longer_than_the_message_limit_runs_no_turn(live, client, channel_settings, fake_openai, stored):
    limit = channel_settings.max_message_chars
    refused = metric(client, TOO_LONG)
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "tour " * (limit // 5) + "x")
        prompt(ws, "When do you open?")
        got = tokens(ws)
    assert "".join(m["token"] for _, m in got).strip() == "echo: When do you open?"
    assert metric(client, TOO_LONG) == refused + 1
    assert [r["body"]["messages"][-1]["content"] for r in fake_openai.chat_requests()] == ["When do you open?"]
    assert [m.text for m in stored.messages(f"phone:{vendors.CALLER}") if m.role == Role.USER] == ["When do you open?"]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def server_log():
    """Every record the gateway and its server log (uvicorn's error logger does not propagate to root)."""
    handler = _Records()
    loggers = [logging.getLogger(), logging.getLogger("uvicorn.error")]
    for logger in loggers:
        logger.addHandler(handler)
    yield handler.records
    for logger in loggers:
        logger.removeHandler(handler)


def test_a_frame_too_big_or_nested_too_deep_closes_the_socket_cleanly(live, fake_openai, server_log):
    deep = "[" * 100_000 + "]" * 100_000
    with socket(live) as ws:
        setup(ws)
        ws.send(deep)
        closed = _closed(ws)
    assert (closed.rcvd.code, closed.rcvd.reason) == (1009, "frame of 200000 bytes; the limit is 65536")
    with socket(live) as ws:
        setup(ws)
        ws.send(json.dumps({"type": "prompt", "voicePrompt": "hi", "extra": json.loads("[" * 100 + "]" * 100)}))
        closed = _closed(ws)
    assert (closed.rcvd.code, closed.rcvd.reason) == (1007, "frame: nested deeper than 64 levels")
    with socket(live) as ws:
        setup(ws)
        ws.send("not json")
        closed = _closed(ws)
    assert closed.rcvd.code == 1007 and closed.rcvd.reason.startswith("frame: not valid JSON")
    assert fake_openai.chat_requests() == []
    assert not [r for r in server_log if r.exc_info], [r.getMessage() for r in server_log if r.exc_info]


@pytest.mark.parametrize("channel_overrides", [{"twilio_voice_mode": "relay",
                                                "twilio_relay_max_frame_bytes": 1_000_000}])
def test_a_100000_deep_frame_under_the_size_limit_is_closed_without_a_traceback(live, fake_openai, server_log):
    with socket(live) as ws:
        setup(ws)
        ws.send("[" * 100_000 + "]" * 100_000)
        closed = _closed(ws)
    assert (closed.rcvd.code, closed.rcvd.reason) == (1007, "frame: nested deeper than 64 levels")
    assert not [r for r in server_log if r.exc_info], [r.getMessage() for r in server_log if r.exc_info]

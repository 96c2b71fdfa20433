"""A relay call's faults: a socket that drops mid-reply, a second socket for the same call, calls at once,
and a call's state kept bounded (prompts faster than replies, a "word" that never ends)."""

from __future__ import annotations

import json

import pytest

from channels.twilio.relay import MAX_TURNS_IN_FLIGHT, MAX_WORD_CHARS
from gateway.core.models import Role
from tests.channels import vendors
from tests.channels.conftest import metric, wait_until
from tests.channels.relay_client import prompt, setup, socket, tokens

REPLY = ("Our guided coastal tour leaves every Saturday at half past ten from the harbour. It takes about three "
         "hours on easy flat paths and costs forty euros with the bike and the guide included.")
OTHER_CALL, OTHER_CALLER = "CA" + "2" * 32, "+15557770002"


@pytest.fixture
def channel_overrides() -> dict:
    return {"twilio_voice_mode": "relay", "retrieval_strategy": "hybrid"}


def _agent_texts(stored, caller: str = vendors.CALLER) -> list[str]:
    return [m.text for m in stored.messages(f"phone:{caller}") if m.role == Role.AGENT]


def _spoken(got: list[tuple[float, dict]]) -> str:
    return "".join(m["token"] for _, m in got if m["type"] == "text")


def test_a_dropped_socket_keeps_what_was_said_and_a_second_socket_resumes_the_call(live, fake_openai, stored):
    fake_openai.chunk_chars, fake_openai.chunk_delay_s = 6, 0.05
    fake_openai.script_reply(REPLY)
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "My name is Ada. Tell me about the tours.")
        heard = "".join(json.loads(ws.recv(timeout=10))["token"] for _ in range(3))
    # The socket dropped mid-reply: the transcript keeps what went out on it, not the whole answer.
    wait_until(lambda: _agent_texts(stored), what="the cut reply to be stored")
    kept = _agent_texts(stored)[-1]
    assert kept.startswith(heard) and REPLY.startswith(kept.rstrip()) and len(kept) < len(REPLY) / 2
    requests = len(fake_openai.chat_requests())
    fake_openai.script_reply("You are Ada.")
    with socket(live) as ws:
        setup(ws)  # the same call on a second socket (its URL from a new signed webhook for the call)
        assert tokens(ws, until_last=False, timeout=0.8) == []  # nothing of the old reply is said again
        prompt(ws, "What is my name?")
        again = tokens(ws)
    assert _spoken(again).strip() == "You are Ada."
    sent = fake_openai.chat_requests()[requests]["body"]["messages"]
    history = [(m["role"], m["content"]) for m in sent[1:]]
    assert history == [("user", "My name is Ada. Tell me about the tours."), ("assistant", kept),
                       ("user", "What is my name?")]
    # The reply's last token goes out before the turn stores it: wait for the store, not just the socket.
    wait_until(lambda: len(_agent_texts(stored)) == 2, what="the second reply to be stored")
    assert _agent_texts(stored) == [kept, "You are Ada."]


def test_two_calls_at_once_share_nothing_a_cut_in_one_leaves_the_other_whole(live, fake_openai, stored):
    fake_openai.chunk_chars, fake_openai.chunk_delay_s = 5, 0.04  # unscripted: each call hears its echo
    first = "alpha one two three four five six seven eight nine ten eleven twelve"
    second = "bravo one two three four five six seven eight nine ten eleven twelve"
    with socket(live) as a, socket(live, OTHER_CALL, OTHER_CALLER) as b:
        setup(a)
        setup(b, call_sid=OTHER_CALL, caller=OTHER_CALLER)
        prompt(a, first)
        prompt(b, second)
        heard = json.loads(a.recv(timeout=10))["token"]
        a.send(json.dumps({"type": "interrupt", "utteranceUntilInterrupt": heard}))
        whole = tokens(b)
        late = tokens(a, until_last=False, timeout=0.5)
    assert _spoken(whole) == f"echo: {second}" and whole[-1][1]["last"] is True
    assert [m for _, m in late if m.get("type") == "text"][1:] == []  # at most one token was already on its way
    wait_until(lambda: len(_agent_texts(stored)) == 1 and len(_agent_texts(stored, OTHER_CALLER)) == 1,
               what="both replies to be stored")
    assert _agent_texts(stored) == [heard] and _agent_texts(stored, OTHER_CALLER) == [f"echo: {second}"]
    users = {m.text for m in stored.messages(f"phone:{vendors.CALLER}") if m.role == Role.USER}
    assert users == {first}  # each call's conversation holds its own words only


def test_prompts_faster_than_replies_are_refused_past_a_bound_and_the_call_goes_on(live, client, fake_openai):
    fake_openai.chunk_chars, fake_openai.chunk_delay_s = 4, 0.05
    refused = metric(client, 'switchboard_rejected_requests_total{channel="twilio_relay",reason="busy"}')
    with socket(live) as ws:
        setup(ws)
        for i in range(8):
            prompt(ws, f"question number {i} about the tours")
        assert MAX_TURNS_IN_FLIGHT <= 4  # a few replies of one call at a time, however fast prompts come
        wait_until(lambda: metric(client, 'switchboard_rejected_requests_total{channel="twilio_relay",'
                                          'reason="busy"}') == refused + 8 - MAX_TURNS_IN_FLIGHT,
                   what="the prompts past the bound refused")
        tokens(ws, until_last=False, timeout=2.0)  # whatever the cut replies still said
        assert 1 <= len(fake_openai.chat_requests()) <= MAX_TURNS_IN_FLIGHT
        fake_openai.script_reply("x" * 300)  # a "word" that never ends still goes out in bounded pieces
        prompt(ws, "spell it")
        got = tokens(ws)
    pieces = [m["token"] for _, m in got if m["type"] == "text"]
    assert "".join(pieces) == "x" * 300 and got[-1][1]["last"] is True
    assert len(pieces) >= 300 // (MAX_WORD_CHARS + 4) and max(map(len, pieces)) <= min(MAX_WORD_CHARS + 4, 100)

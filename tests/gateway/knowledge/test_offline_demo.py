"""With no language model configured the demo agent still answers from the knowledge base."""

from __future__ import annotations

import logging

import httpx
import pytest

from gateway.http.app import create_app
from tests.conftest import make_settings
from tests.fakes.live_server import LiveServer


def _ask(server, session, text):
    resp = httpx.post(f"{server.url}/api/chat/sessions/{session['session_id']}/messages", json={"text": text},
                      headers={"Authorization": f"Bearer {session['token']}"}, timeout=30)
    return resp.json()


@pytest.fixture
def offline(agent_id, redis_url, tmp_path, request):
    settings = make_settings(agent_id=agent_id, redis_url=redis_url, data_dir=tmp_path, demo=request.param)
    assert not settings.llm_configured
    with LiveServer(create_app(settings)) as server:
        yield server, httpx.post(f"{server.url}/api/chat/sessions").json()


@pytest.mark.parametrize("offline", [True], indirect=True)
def test_demo_questions_are_answered_from_the_knowledge_base(offline):
    server, session = offline
    hours = _ask(server, session, "When are you open on Saturday?")
    assert hours["reply"]["text"].startswith("Opening hours\n\nHarbor Bikes is open Monday to Friday")
    assert hours["sources"][0]["source"] == "opening-hours"
    # A follow-up on another topic is not pinned to the previous one.
    prices = _ask(server, session, "How much does an e-bike cost per day?")
    assert prices["reply"]["text"].startswith("Bike rental prices")
    unknown = _ask(server, session, "What is the capital of France?")
    assert unknown["reply"]["text"] == "I don't know the answer to that yet."


@pytest.mark.parametrize("offline", [False], indirect=True)
def test_without_a_knowledge_base_the_visitor_gets_visitor_words_and_the_log_the_operators(offline, caplog):
    server, session = offline
    with caplog.at_level(logging.WARNING, logger="gateway.turn.responders"):
        reply = _ask(server, session, "Hello?")["reply"]["text"]
    assert reply == "Sorry, I can't answer questions here yet. Please try again later."
    assert "SWITCHBOARD" not in reply and "language model" not in reply
    [said] = [r.getMessage() for r in caplog.records if r.name == "gateway.turn.responders"]
    assert "no language model is configured and the knowledge base is empty" in said
    assert "SWITCHBOARD_LLM_API_KEY" in said


@pytest.mark.parametrize("offline", [True], indirect=True)
def test_an_answer_lists_only_the_sources_it_used(offline):
    server, session = offline
    unknown = _ask(server, session, "Do you sell pottery glaze at the shop?")
    assert unknown["reply"]["text"] == "I don't know the answer to that yet.", unknown
    assert unknown["sources"] == [], unknown["sources"]  # all far below the floor: no "Sources (2)"
    hours = _ask(server, session, "When are you open on Saturday?")
    first = hours["sources"][0]
    assert first["source"] == "opening-hours" and first["cited"] is True  # the reply is that topic word for word
    assert all(s["cited"] or s["score"] >= 0.01 for s in hours["sources"]), hours["sources"]

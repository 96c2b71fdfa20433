"""A relay call whose knowledge context comes from the queued RQ job (SWITCHBOARD_TWILIO_RELAY_RAG_MODE=queued)
instead of the turn's own search: the model still gets the knowledge base's answer, and the trace says
how long the call waited for the job."""

from __future__ import annotations

import json

import pytest

from gateway.core.models import Role
from gateway.jobs.worker import InProcessWorker
from tests.channels import vendors
from tests.channels.relay_client import prompt, setup, socket, tokens

ADMIN = {"Authorization": "Bearer admin-secret"}
TOUR = {"source": "guided-tours", "title": "Guided tours", "facts": ["coastal tour Saturdays 10:30, 40 euros"],
        "summary": "Our guided coastal tour leaves every Saturday at 10:30 and costs 40 euros."}


@pytest.fixture
def channel_overrides() -> dict:
    return {"twilio_voice_mode": "relay", "twilio_relay_rag_mode": "queued", "retrieval_strategy": "hybrid"}


@pytest.fixture
def rag_worker(live):
    """The RQ worker a deployment runs beside the gateway (``switchboard worker``), here in its process."""
    worker = InProcessWorker(live.services.redis_sync, live.services.settings)
    worker.start()
    yield worker
    worker.stop()


def test_a_queued_knowledge_job_feeds_the_relay_turn(live, client, fake_openai, stored, rag_worker):
    assert client.post("/api/kb/topics", json=TOUR, headers=ADMIN).status_code == 201
    fake_openai.script_reply("Yes, every Saturday at 10:30.")
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "Do you offer guided tours?")
        got = tokens(ws)
    assert "".join(m["token"] for _, m in got if m["type"] == "text").strip() == "Yes, every Saturday at 10:30."
    assert "leaves every Saturday at 10:30" in json.dumps(fake_openai.chat_requests()[-1]["body"]["messages"])
    agent = [m for m in stored.messages(f"phone:{vendors.CALLER}") if m.role == Role.AGENT][-1]
    retrieval = stored.traces(agent)[-1].retrieval
    assert "voice_wait" in retrieval.timings_ms and retrieval.selected[:1] == ["guided-tours"] and not retrieval.skipped

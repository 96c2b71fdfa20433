"""What a turn's trace says about its cost (per-stage CPU, Redis round trips), turns bounded to a few at once in
their CPU-heavy phases (SWITCHBOARD_TURN_CPU_SLOTS) still all answer, in parallel, and what the process does
not do on its event loop under a burst (package-metadata reads per Redis connection, frequent collections)."""

from __future__ import annotations

import asyncio
import gc
import importlib.metadata
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from gateway.http.app import GC_THRESHOLDS, create_app
from gateway.services import Services
from tests.fakes.live_server import LiveServer
from tests.inspect import read_trace


def _turn(base: str, text: str) -> dict:
    session = httpx.post(f"{base}/api/chat/sessions").json()
    reply = httpx.post(f"{base}/api/chat/sessions/{session['session_id']}/messages", json={"text": text},
                       headers={"Authorization": f"Bearer {session['token']}"}, timeout=30)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_a_turn_trace_has_each_stage_cpu_and_its_redis_round_trips(gateway):
    # A process's very first turn also pays one-time reads (12 round trips against 5 for the next new
    # conversation's); an earlier conversation pays them here, as earlier tests did inside the suite.
    _turn(gateway.url, "Hello")
    answer = _turn(gateway.url, "Do you open on Sundays?")
    assert answer["reply"]["text"] == "echo: Do you open on Sundays?"
    trace = read_trace(gateway.services, answer["turn_id"])
    stages = {s.stage: s for s in trace.stages}
    assert {"accept", "memory", "context", "prompt", "llm", "deliver"} <= set(stages)
    assert all(s.cpu_ms is not None and s.cpu_ms >= 0 for s in trace.stages)
    assert sum(s.cpu_ms for s in trace.stages) > 0
    # Counted by the connections themselves, up to the closing round trip (not counted: it stores the trace):
    # arrival, opening writes, lock and reads, intent: four in an open conversation, a few more for a
    # conversation's first message, as here (docs/architecture/turn.md).
    assert 4 <= trace.redis_round_trips <= 10 and trace.redis_cpu_ms > 0


def test_turns_beyond_the_cpu_slots_wait_for_one_and_all_answer(settings, fake_openai):
    fake_openai.default_delay_s = 1.0  # the turns overlap: they wait on the LLM together, holding no slot
    with LiveServer(create_app(settings.model_copy(update={"turn_cpu_slots": 1}))) as server:
        services = server.server.config.app.state.services
        t0 = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda i: _turn(server.url, f"question {i}"), range(8)))
        elapsed = time.perf_counter() - t0
        assert [a["reply"]["text"] for a in answers] == [f"echo: question {i}" for i in range(8)]
        assert services.pipeline.slots.waited > 0
        # In parallel: one slot held across each 1 s LLM call would have made them take 8 s in a row.
        assert elapsed < 5.0


async def test_new_redis_connections_do_not_read_the_installed_packages_metadata(settings, monkeypatch):
    services = Services.build(settings)
    looked_up: list[str] = []
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: looked_up.append(name) or real(name))
    try:
        # Eight commands at once: the pool opens eight connections, as it does at the start of a burst.
        assert await asyncio.gather(*(services.redis.ping() for _ in range(8))) == [True] * 8
    finally:
        await services.aclose()
    assert "redis" not in looked_up


def test_the_app_collects_garbage_less_often_while_it_serves_and_restores_it_after(settings):
    before = gc.get_threshold()
    with LiveServer(create_app(settings.model_copy(update={"gc_tuning": True}))):
        assert gc.get_threshold() == GC_THRESHOLDS != before
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    with LiveServer(create_app(settings.model_copy(update={"gc_tuning": False}))):  # as the suite's gateways run
        assert gc.get_threshold() == before and gc.get_freeze_count() == 0

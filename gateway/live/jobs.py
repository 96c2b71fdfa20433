"""RQ job functions of live context: thin and synchronous (ids in → service call on the owning loop)."""

from __future__ import annotations

from gateway.jobs.registry import run_job


def timer_tick_job(agent_id: str, timer: str, slot: str) -> str:
    return run_job(agent_id, lambda s: s.live.timers.tick(timer, slot))


def fetch_data_job(agent_id: str, slot: str = "") -> str:
    return run_job(agent_id, lambda s: s.live.data_injection.fetch(slot))


def extract_meta_job(agent_id: str, persona_id: str) -> str | None:
    return run_job(agent_id, lambda s: s.live.conversation_meta.extract(persona_id))

"""The voice path's RAG job on real `switchboard worker` processes: a worker killed mid-job
does not lose the job; RQ retries it on the next worker."""

from __future__ import annotations

import signal
import time

import pytest
from rq.job import Job, JobStatus
from rq.registry import StartedJobRegistry

from gateway.services import Services
from tests.workers import start_worker, stop_workers


def _worker(settings, fake_openai, tmp_path, name):
    return start_worker({
        "SWITCHBOARD_REDIS_URL": settings.redis_url,
        "SWITCHBOARD_AGENT_ID": settings.agent_id,
        "SWITCHBOARD_DATA_DIR": str(tmp_path / name),
        "SWITCHBOARD_EMBEDDINGS": "none",
        "SWITCHBOARD_DEMO": "true",  # the worker owns a knowledge base with the demo topics
        "SWITCHBOARD_LLM_BASE_URL": fake_openai.url,
        "SWITCHBOARD_LLM_API_KEY": "sk-test",
        "SWITCHBOARD_LLM_MAX_RETRIES": "0",
        "SWITCHBOARD_LOG_LEVEL": "WARNING",
    })


def _wait(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


async def test_a_job_whose_worker_dies_mid_job_is_retried(settings, fake_openai, tmp_path):
    services = Services.build(settings)
    persona = await services.store.resolve_persona("phone:+15550199")
    # First attempt: the selection call hangs, so the worker is killed while the job runs.
    fake_openai.script_reply('{"search_result": {}}', delay_s=60)
    fake_openai.script_json({"search_result": {"article_id_1": "opening-hours", "article_id_2": "none",
                                               "article_id_3": "none"}})
    job = services.rag.enqueue(persona.id, "When are you open on Saturdays?")
    first = _worker(settings, fake_openai, tmp_path, "w1")
    second = None
    try:
        _wait(lambda: len(fake_openai.chat_requests()) == 1, 60, "the first attempt to call the LLM")
        assert job.get_status(refresh=True) == JobStatus.STARTED
        first.send_signal(signal.SIGKILL)
        first.wait(10)

        # RQ notices an abandoned job when its heartbeat expires (a minute or more); move the clock.
        registry = StartedJobRegistry(queue=services.queues["rag"])
        registry.cleanup(timestamp=time.time() + 3600)
        second = _worker(settings, fake_openai, tmp_path, "w2")
        _wait(lambda: Job.fetch(job.id, connection=services.redis_sync).get_status() == JobStatus.FINISHED,
              90, "the retried job to finish")
    finally:
        stop_workers(first, second)
    assert len(fake_openai.chat_requests()) == 2
    rag = await services.persona_attributes.get(persona.id, "rag")
    assert rag.startswith("Opening hours\nHarbor Bikes is open Monday to Friday")
    assert Job.fetch(job.id, connection=services.redis_sync).return_value()["selected"] == ["opening-hours"]
    await services.aclose()

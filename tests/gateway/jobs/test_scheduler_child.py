"""`switchboard worker` runs RQ's scheduler in a forked child; a SIGKILLed worker must not leave that
child running (holding the scheduler locks), so the next worker takes over scheduling at once."""

from __future__ import annotations

import signal
import time

import psutil
import redis

from gateway.jobs.worker import queue_names
from tests.workers import start_worker, stop_workers


def _until(check, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return found


def _scheduler_lock_owner(client: redis.Redis, queue: str) -> bytes | None:
    return client.get(f"rq:scheduler-lock:{queue}")


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_sigkilled_workers_scheduler_child_stops_and_the_next_worker_schedules(settings, tmp_path):
    env = {
        "SWITCHBOARD_REDIS_URL": settings.redis_url, "SWITCHBOARD_AGENT_ID": settings.agent_id,
        "SWITCHBOARD_QDRANT_URL": ":memory:", "SWITCHBOARD_EMBEDDINGS": "none",
        "SWITCHBOARD_INBOX_CONSUMER": "false", "SWITCHBOARD_LOG_LEVEL": "WARNING",
    }
    queue = queue_names(settings)[0]
    client = redis.Redis.from_url(settings.redis_url)
    first = second = None
    try:
        first = start_worker({**env, "SWITCHBOARD_DATA_DIR": str(tmp_path / "w1")})
        worker = psutil.Process(first.pid)
        [child] = _until(worker.children, 60, "the first worker's scheduler child")
        first_owner = _until(lambda: _scheduler_lock_owner(client, queue), 10, "the scheduler lock")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        _until(lambda: not _running(child.pid), 5, "the orphaned scheduler child to stop")
        second = start_worker({**env, "SWITCHBOARD_DATA_DIR": str(tmp_path / "w2")})
        new_owner = _until(lambda: (owner := _scheduler_lock_owner(client, queue)) not in (None, first_owner)
                           and owner, 60, "the second worker's scheduler to take the lock")
        # The worker takes the lock an instant before it forks the scheduler child.
        [second_child] = _until(psutil.Process(second.pid).children, 10, "the second worker's scheduler child")
        assert new_owner != first_owner and _running(second_child.pid)
    finally:
        stop_workers(first, second)
        client.delete(*(f"rq:scheduler-lock:{q}" for q in queue_names(settings)))
        client.close()

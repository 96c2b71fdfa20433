"""RQ workers: an in-process one for the embedded gateway, and ``switchboard worker`` for production."""

from __future__ import annotations

import logging
import threading
import time
from uuid import uuid4

from redis import Redis
from rq import Queue, SimpleWorker
from rq.scheduler import RQScheduler
from rq.timeouts import TimerDeathPenalty

from gateway.core.settings import Settings

log = logging.getLogger(__name__)

QUEUES = ("rag", "jobs", "timers")


def queue_names(settings: Settings) -> list[str]:
    return [settings.queue_name(q) for q in QUEUES]


class ThreadWorker(SimpleWorker):
    """A SimpleWorker that can live in a thread: no signal handlers, timer-based job timeouts."""

    death_penalty_class = TimerDeathPenalty

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        if timeout is None:  # burst mode: RQ returns at once when the queues are empty
            return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        # RQ's loop only returns on a job; wake up every second so a stop request is noticed.
        while not self._stop_requested:
            result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time=1)
            if result is not None:
                return result
        return None

    def _install_signal_handlers(self) -> None:
        pass


class InProcessWorker:
    """Runs the agent's queues and their scheduled jobs in background threads of this process.

    The ``rag`` queue has a thread of its own: a voice turn waits for its RAG job, so that job
    must never queue behind a slower one (meta extraction, a data-injection fetch).
    """

    def __init__(self, redis: Redis, settings: Settings, poll_s: float = 0.2) -> None:
        self.redis = redis
        self.settings = settings
        self.poll_s = poll_s
        self.queues = [Queue(name, connection=redis) for name in queue_names(settings)]
        self.workers: list[ThreadWorker] = []  # built at start: an RQ worker talks to Redis when it is made
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        rag, others = self.queues[0], self.queues[1:]
        agent = self.settings.agent_id
        self.workers = [
            ThreadWorker([rag], connection=self.redis, name=f"embedded-{agent}-rag-{uuid4().hex[:6]}"),
            ThreadWorker(others, connection=self.redis, name=f"embedded-{agent}-jobs-{uuid4().hex[:6]}"),
        ]
        self._threads = [
            *(threading.Thread(target=self._work, args=(w,), name=w.name, daemon=True) for w in self.workers),
            threading.Thread(target=self._schedule, name="rq-scheduler", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        for worker in self.workers:
            worker._stop_requested = True
        for thread in self._threads:
            thread.join(timeout_s)

    @staticmethod
    def _work(worker: ThreadWorker) -> None:
        try:
            worker.work(logging_level="WARNING")
        except Exception:
            log.exception("embedded RQ worker %s stopped with an error", worker.name)

    def _schedule(self) -> None:
        """Move due ``enqueue_at``/``enqueue_in`` jobs onto their queues (what RQ's scheduler does)."""
        scheduler = RQScheduler(self.queues, connection=self.redis)
        while not self._stop.wait(self.poll_s):
            try:
                scheduler.acquire_locks()
                if scheduler.acquired_locks:
                    scheduler.enqueue_scheduled_jobs()
            except Exception:
                log.exception("embedded RQ scheduler tick failed")
                time.sleep(1)
        scheduler.release_locks()

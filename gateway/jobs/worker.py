"""RQ workers: an in-process one for the embedded gateway, and ``switchboard worker`` for production."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
import time
from uuid import uuid4

from redis import Redis
from rq import Queue, SimpleWorker
from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT
from rq.scheduler import RQScheduler
from rq.timeouts import TimerDeathPenalty

from gateway.core.settings import Settings

log = logging.getLogger(__name__)

QUEUES = ("rag", "jobs", "timers")
PR_SET_PDEATHSIG = 1  # linux/prctl.h


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


def _stop_when_parent_dies(sig: int) -> bool:
    """Ask the kernel to send ``sig`` to this process when the thread that forked it dies (Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        log.warning("could not tie the RQ scheduler to its worker: errno %d", ctypes.get_errno())
        return False
    return True


class ParentBoundScheduler(RQScheduler):
    """RQ's scheduler process, stopped when its worker dies.

    RQ forks the scheduler from the worker; a worker that is SIGKILLed never stops it, so the child
    would run on as an orphan holding the scheduler locks and no new worker could schedule. Here the
    child asks for SIGTERM on its parent's death, which RQ's scheduler handles by releasing its locks
    and exiting; a worker that died before the child got that far is noticed by its parent pid.
    """

    _parent_pid: int | None = None

    def start(self):  # noqa: ANN201 - RQ's signature
        self._parent_pid = os.getpid()
        return super().start()

    def work(self) -> None:
        self._install_signal_handlers()  # before the parent-death signal can arrive
        _stop_when_parent_dies(signal.SIGTERM)
        if self._parent_pid is not None and os.getppid() != self._parent_pid:
            self.request_stop()  # the worker was gone before the signal was armed
        super().work()


class SchedulingWorker(SimpleWorker):
    """``switchboard worker``'s RQ worker: RQ's ``SimpleWorker`` whose scheduler child dies with it."""

    def _start_scheduler(self, burst: bool = False, logging_level: str | None = "INFO",
                         date_format: str = DEFAULT_LOGGING_DATE_FORMAT,
                         log_format: str = DEFAULT_LOGGING_FORMAT) -> None:
        # RQ's own method, with the scheduler class swapped (RQ has no hook for it).
        self.scheduler = ParentBoundScheduler(
            self.queues, connection=self.connection,
            logging_level=logging_level if logging_level is not None else self.log.level,
            date_format=date_format, log_format=log_format, serializer=self.serializer,
        )
        self.scheduler.acquire_locks()
        if not self.scheduler.acquired_locks:
            return  # another worker schedules; run_maintenance_tasks retries (auto_start) later
        if burst:
            try:
                self.scheduler.register_birth()
                self.scheduler.enqueue_scheduled_jobs()
            finally:
                self.scheduler.release_locks()
                self.scheduler.register_death()
        else:
            self.scheduler.start()


LOCK_REFRESH_S = 10.0  # well inside the scheduler locks' life (RQScheduler.interval + 60 s)


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
        """Move due ``enqueue_at``/``enqueue_in`` jobs onto their queues (what RQ's scheduler does). Due
        jobs are looked for every ``poll_s``; the queues' scheduler locks (which live ``interval + 60`` s)
        are taken or refreshed every ``LOCK_REFRESH_S`` only: taking them on every tick (a Lua script per
        queue) was most of an idle gateway's CPU."""
        scheduler = RQScheduler(self.queues, connection=self.redis)
        locked_at: float | None = None
        while not self._stop.wait(self.poll_s):
            try:
                if locked_at is None or time.monotonic() - locked_at >= LOCK_REFRESH_S:
                    scheduler.acquire_locks()
                    locked_at = time.monotonic()
                if scheduler.acquired_locks:
                    scheduler.enqueue_scheduled_jobs()
            except Exception:
                log.exception("embedded RQ scheduler tick failed")
                locked_at = None
                time.sleep(1)
        scheduler.release_locks()

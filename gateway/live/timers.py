"""Timers on RQ's scheduler: each tick is a job scheduled for one slot (a period, a local day).

A tick schedules the next one itself (an ``enqueue_at`` chain), so timers survive restarts and need
no process of their own. The next slot is computed from the current settings at every tick, so a
changed period takes effect without a restart; a tick whose slot no longer matches the settings is
stale and does nothing. Slot job ids are unique and each slot is claimed with ``SET NX`` before it
fires, so several workers (or replicas all scheduling on start) never fire one slot twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from rq import Queue
from rq.exceptions import DuplicateJobError

from gateway.conversation.store import RedisStore
from gateway.core.clock import Clock
from gateway.jobs.registry import run_job

log = logging.getLogger(__name__)

TIMER_TICK_JOB = "timer_tick"  # the job that runs ``Timers.tick``


@dataclass(frozen=True)
class Slot:
    id: str  # letters, digits, "-" and "_" (it becomes part of an RQ job id)
    at: datetime  # when the slot starts (its tick fires then)


@dataclass(frozen=True)
class Timer:
    """A named timer: which slot ``now`` is in, the one after it, and what firing a slot does."""

    name: str
    current: Callable[[datetime], Awaitable[Slot]]
    following: Callable[[datetime], Awaitable[Slot]]
    fire: Callable[[str], Awaitable[object]]


def period_slot(prefix: str, period_s: int, now: datetime, offset: int = 0) -> Slot:
    n = int(now.timestamp()) // period_s + offset
    return Slot(f"{prefix}{period_s}s-{n}", datetime.fromtimestamp(n * period_s, UTC))


def periodic_timer(name: str, prefix: str, period_s: int, fire: Callable[[], Awaitable[object]]) -> Timer:
    """A timer that calls ``fire()`` once every ``period_s`` (slots ``<prefix><period>s-<n>``)."""

    async def current(now: datetime) -> Slot:
        return period_slot(prefix, period_s, now)

    async def following(now: datetime) -> Slot:
        return period_slot(prefix, period_s, now, offset=1)

    async def tick(slot: str) -> None:
        await fire()

    return Timer(name, current, following, tick)


class Timers:
    def __init__(self, store: RedisStore, queue: Queue, agent_id: str, clock: Clock) -> None:
        self.store = store
        self.queue = queue
        self.agent_id = agent_id
        self.clock = clock
        self.timers: dict[str, Timer] = {}

    def add(self, timer: Timer) -> None:
        self.timers[timer.name] = timer

    def job_id(self, timer: str, slot: str) -> str:
        return f"timer-{self.agent_id}-{timer}-{slot}"

    async def ensure(self, name: str) -> Slot:
        """Schedule the next slot's tick (a no-op when it is already scheduled by anyone)."""
        slot = await self.timers[name].following(self.clock.now())
        await asyncio.to_thread(self._schedule, name, slot)
        return slot

    async def ensure_all(self) -> None:
        for name in self.timers:
            await self.ensure(name)

    def _schedule(self, name: str, slot: Slot) -> None:
        job = self.queue.create_job(
            run_job, args=(self.agent_id, TIMER_TICK_JOB, name, slot.id), job_id=self.job_id(name, slot.id),
            result_ttl=600, failure_ttl=24 * 3600, description=f"timer {name} slot {slot.id}",
            # A tick not started an hour after its slot is stale anyway; its key then cleans itself up.
            ttl=max(60, int((slot.at - self.clock.now()).total_seconds()) + 3600),
        )
        try:
            self.queue.schedule_job(job, slot.at, unique=True)
        except DuplicateJobError:
            pass  # another process scheduled this slot already: that is the point of the id

    async def claim(self, name: str, slot: str) -> bool:
        key = self.store.key("timer", name, slot)
        return bool(await self.store.redis.set(key, self.clock.now().isoformat(), nx=True, ex=7 * 24 * 3600))

    async def tick(self, name: str, slot: str) -> str:
        """Fire ``slot`` once if it is still current, then schedule the next one."""
        timer = self.timers[name]
        try:
            current = await timer.current(self.clock.now())
            if current.id != slot:
                return f"stale slot {slot} (now {current.id})"
            if not await self.claim(name, slot):
                return f"slot {slot} already fired"
            await timer.fire(slot)
            return f"fired {slot}"
        finally:
            await self.ensure(name)

    async def scheduled(self, name: str) -> list[str]:
        """Slot ids of this timer's scheduled ticks (for the admin view and tests)."""
        ids = await asyncio.to_thread(lambda: self.queue.scheduled_job_registry.get_job_ids())
        prefix = self.job_id(name, "")
        return [i[len(prefix):] for i in ids if i.startswith(prefix)]

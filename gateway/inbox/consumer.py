"""Turn consumers: take acknowledged deliveries from the inbox and run their turns.

Many turns run at once (``inbox_concurrency`` per process; most of a turn is waiting on the LLM),
yet each chat's deliveries are accepted in arrival order across every consumer process: the
webhook gave each delivery a ticket, and ``accept`` runs under that chat's ticket lock. An entry is
acknowledged only when its turn has finished. While a turn runs its entry is kept alive; if the
process dies, another consumer claims the entry after ``inbox_reclaim_s`` and resumes it (from the
accepted turn when the user message was already persisted, so it is neither lost nor stored
twice). On a graceful stop, turns that do not finish within the drain time are handed back at
once. A delivery that cannot be processed is dead-lettered with its reason.

When Redis (or a bug) makes a step of the loop fail, the step backs off (``Backoff``) and each
failure is counted in ``switchboard_inbox_loop_errors_total{step}``; the log gets the traceback
once and then a short line at most every ``LOG_AGAIN_S`` — not a line on every poll.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from dataclasses import dataclass
from uuid import uuid4

from gateway.core.metrics import Metrics
from gateway.core.settings import Settings
from gateway.inbox.handler import DeliveryRejected, InboxHandler, SendWork, TurnWork, Work
from gateway.inbox.stream import Delivery, Inbox
from gateway.turn.runner import TurnRunner

__all__ = ["Backoff", "InboxConsumer"]

log = logging.getLogger(__name__)

LOG_AGAIN_S = 60.0  # while a step keeps failing, one short line this often


@dataclass(frozen=True)
class Backoff:
    """How long a failing step waits before it tries again: ``first_s``, doubled per failure in a
    row, at most ``max_s``; a success starts it over."""

    first_s: float = 0.5
    max_s: float = 30.0

    def delay(self, failures: int) -> float:
        return min(self.first_s * 2 ** min(max(failures - 1, 0), 32), self.max_s)


class FailureStreak:
    """One step's failures: counted, and logged without flooding the log.

    The traceback of each kind of error is logged the first time it happens; after that one short
    line at most every ``LOG_AGAIN_S``, saying how often the step failed meanwhile.
    """

    def __init__(self, step: str, what: str, metrics: Metrics) -> None:
        self.what = what
        self.failures = 0  # in a row: what the backoff goes by
        self._counter = metrics.inbox_loop_errors.labels(step)
        self._traced: set[type[BaseException]] = set()
        self._logged_at = float("-inf")
        self._unlogged = 0

    def failed(self, exc: Exception) -> None:
        self.failures += 1
        self._counter.inc()
        now = time.monotonic()
        if type(exc) not in self._traced:
            self._traced.add(type(exc))
            log.error("%s failed; retrying with backoff", self.what, exc_info=exc)
        elif now - self._logged_at >= LOG_AGAIN_S:
            log.error("%s keeps failing (%d times since the last line): %s: %s", self.what,
                      self._unlogged + 1, type(exc).__name__, exc)
        else:
            self._unlogged += 1
            return
        self._logged_at, self._unlogged = now, 0

    def succeeded(self) -> None:
        if self.failures > 1:
            log.warning("%s works again after %d failures in a row", self.what, self.failures)
        self.failures = 0


class InboxConsumer:
    def __init__(
        self, inbox: Inbox, runner: TurnRunner, settings: Settings, metrics: Metrics,
        handlers: dict[str, InboxHandler] | None = None, backoff: Backoff = Backoff(),
    ) -> None:
        self.inbox = inbox
        self.runner = runner
        self.settings = settings
        self.metrics = metrics
        self.handlers: dict[str, InboxHandler] = handlers if handlers is not None else {}
        self.name = f"{socket.gethostname()}-{os.getpid()}-{uuid4().hex[:6]}"
        self.capacity = settings.inbox_concurrency
        self.reclaim_ms = int(settings.inbox_reclaim_s * 1000)
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self._slot = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._reclaim_from = "0-0"  # XAUTOCLAIM scans the pending list a page at a time
        self._next_reclaim = 0.0
        self.backoff = backoff
        self._read_failures = FailureStreak("read", "inbox read", metrics)
        self._reclaim_failures = FailureStreak("reclaim", "inbox reclaim", metrics)

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    async def start(self) -> None:
        await self.inbox.ensure_group()
        self._tasks = [
            asyncio.create_task(self._read_loop(), name=f"inbox consumer {self.name}"),
            asyncio.create_task(self._keep_alive(), name=f"inbox keep-alive {self.name}"),
        ]
        log.info("inbox consumer %s started (%d turns at once)", self.name, self.capacity)

    async def stop(self) -> None:
        self._stopping = True
        reader, *keepers = self._tasks or [None]
        if reader is not None:  # stop taking deliveries; keep the in-flight ones alive while they drain
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        try:
            await self._drain_or_hand_back()
        finally:
            for task in keepers:
                task.cancel()
            await asyncio.gather(*keepers, return_exceptions=True)

    async def _drain_or_hand_back(self) -> None:
        pending = list(self._inflight.values())
        if pending:
            await asyncio.wait(pending, timeout=self.settings.turn_drain_timeout_s)
        leftovers = dict(self._inflight)
        if leftovers:
            log.warning("handing %d unfinished turn(s) back to the inbox", len(leftovers))
            for task in leftovers.values():
                task.cancel()
            await asyncio.gather(*leftovers.values(), return_exceptions=True)
            try:
                await self.inbox.hand_back(list(leftovers))
            except Exception:  # the entries stay pending and are reclaimed after inbox_reclaim_s
                log.exception("could not hand turns back to the inbox")

    # -- reading ---------------------------------------------------------------------------------
    async def _read_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            free = self.capacity - len(self._inflight)
            if free <= 0:
                self._slot.clear()
                await self._slot.wait()
                continue
            if loop.time() >= self._next_reclaim and await self._reclaim(free):
                continue  # fill what capacity is left on the next round
            block_ms = max(50, min(1000, int((self._next_reclaim - loop.time()) * 1000)))
            try:
                deliveries = await self.inbox.read(self.name, free, block_ms)
            except Exception as exc:  # Redis away: keep trying, the entries wait in the stream
                self._read_failures.failed(exc)
                await asyncio.sleep(self.backoff.delay(self._read_failures.failures))
                continue
            self._read_failures.succeeded()
            for delivery in deliveries:
                self._spawn(delivery)

    async def _reclaim(self, free: int) -> bool:
        """Take up deliveries whose consumer went away; True when there were any."""
        loop = asyncio.get_running_loop()
        try:
            reclaimed, self._reclaim_from = await self.inbox.reclaim(
                self.name, self.reclaim_ms, free, self._reclaim_from
            )
        except Exception as exc:  # reading new deliveries goes on meanwhile; only the reclaims back off
            self._reclaim_failures.failed(exc)
            self._next_reclaim = loop.time() + max(self.settings.inbox_reclaim_s / 2,
                                                   self.backoff.delay(self._reclaim_failures.failures))
            return False
        self._reclaim_failures.succeeded()
        self._next_reclaim = loop.time() + self.settings.inbox_reclaim_s / 2
        reclaimed = [d for d in reclaimed if d.id not in self._inflight]
        for delivery in reclaimed:
            self.metrics.inbox_reclaimed.labels(delivery.channel).inc()
            log.warning("taking up %s delivery %s again (attempt %d): its consumer went away or "
                        "it failed", delivery.channel, delivery.dedup_id, delivery.attempts)
            self._spawn(delivery)
        return bool(reclaimed)

    def _spawn(self, delivery: Delivery) -> None:
        if delivery.id in self._inflight:  # reclaimed from ourselves (a stalled loop let it idle): still running
            return
        task = asyncio.get_running_loop().create_task(self._consume(delivery), name=f"delivery {delivery.id}")
        self._inflight[delivery.id] = task

        def finished(_: asyncio.Task[None]) -> None:
            self._inflight.pop(delivery.id, None)
            self._slot.set()

        task.add_done_callback(finished)

    async def _keep_alive(self) -> None:
        interval = max(0.05, self.settings.inbox_reclaim_s / 3)
        # No backoff here: a late keep-alive lets another consumer take over turns that are running.
        failures = FailureStreak("keep_alive", "keeping in-flight inbox entries alive", self.metrics)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.inbox.keep(self.name, list(self._inflight))
            except Exception as exc:
                failures.failed(exc)
            else:
                failures.succeeded()

    # -- one delivery ----------------------------------------------------------------------------
    async def _consume(self, delivery: Delivery) -> None:
        handler = self.handlers.get(delivery.channel)
        if handler is None:
            await self._dead(delivery, f"no {delivery.channel!r} channel is configured in this process")
            return
        try:
            work = await self._accept(handler, delivery)
        except DeliveryRejected as exc:
            await self._dead(delivery, str(exc))
            return
        except Exception as exc:  # transient (Redis, vendor lookup): retried after inbox_reclaim_s
            log.exception("%s delivery %s failed (attempt %d)", delivery.channel, delivery.dedup_id,
                          delivery.attempts)
            if delivery.attempts >= self.settings.inbox_max_attempts:
                await self._dead(delivery, f"{type(exc).__name__}: {exc}")
            return
        if isinstance(work, TurnWork):
            await self.runner.run_turn(work.turn, work.sink)
        elif isinstance(work, SendWork):
            await self.runner.run_other(work.send(), work.what)
        try:
            await self.inbox.done(delivery)
        except Exception:  # left pending: a later consumer finds the turn finished and only acks it
            log.exception("could not acknowledge %s delivery %s", delivery.channel, delivery.dedup_id)

    async def _accept(self, handler: InboxHandler, delivery: Delivery) -> Work | None:
        if delivery.attempts > 1:
            turn = await self.inbox.accepted(delivery)
            if turn is not None:  # persisted by a consumer that went away: run it, do not store it again
                finished = await self.inbox.store.get_trace(turn.trace.turn_id)
                if finished is not None and finished.agent_message_id is not None:
                    return None  # it had even replied; only its acknowledgement was lost
                return TurnWork(turn, handler.sink_for(delivery))
        async with self.inbox.order.hold(delivery.order_key, delivery.ticket, self.settings.turn_lock_ttl_s):
            work = await handler.accept(delivery)
            if isinstance(work, TurnWork):
                await self.inbox.save_accepted(delivery, work.turn)
        return work

    async def _dead(self, delivery: Delivery, error: str) -> None:
        log.error("%s delivery %s dead-lettered: %s", delivery.channel, delivery.dedup_id, error)
        self.metrics.inbox_dead.labels(delivery.channel).inc()
        await self.inbox.dead_letter(delivery, error)

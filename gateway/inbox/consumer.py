"""Turn consumers: take acknowledged deliveries from the inbox and run their turns.

Many turns run at once (``inbox_concurrency`` per process; most of a turn is waiting on the LLM),
yet each chat's deliveries are accepted in arrival order across every consumer process: the
webhook gave each delivery a ticket, and ``accept`` runs under that chat's ticket lock. An entry is
acknowledged only when its turn has finished. While a turn runs its entry is kept alive; if the
process dies, another consumer claims the entry after ``inbox_reclaim_s`` and resumes it (from the
accepted turn when the user message was already persisted, so it is neither lost nor stored
twice). On a graceful stop, turns that do not finish within the drain time are handed back at
once. A delivery that cannot be processed is dead-lettered with its reason; one that fails for a
reason that may pass (the vendor is away) waits and is tried again with backoff over
``inbox_retry_window_s`` (``gateway.inbox.retries``): while it waits it keeps its entry (renewed like
a running turn) but not a turn slot, and its chat's later deliveries wait behind it, in order.

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
from dataclasses import replace
from typing import Literal
from uuid import uuid4

from gateway.core.awaits import awaiting
from gateway.core.metrics import Metrics
from gateway.core.models import DeliveryStatus, TurnTrace
from gateway.core.settings import Settings
from gateway.inbox.handler import DeliveryRejected, InboxHandler, SendWork, TurnWork, Work
from gateway.inbox.retries import BEHIND, STEP_BEHIND_S, Backoff, RetryWindow, Waiting, scrubbed
from gateway.inbox.stream import Delivery, Inbox
from gateway.turn.pipeline import Turn, opening_writes
from gateway.turn.ports import DeliveryReport, IdempotentSink
from gateway.turn.runner import TurnRunner

__all__ = ["Backoff", "InboxConsumer"]

log = logging.getLogger(__name__)

LOG_AGAIN_S = 60.0  # while a step keeps failing, one short line this often
EARLY_S = 0.05  # a waiting delivery taken up this much before its next try runs now
WAITS: Literal["waits"] = "waits"  # what ``_accept`` answers when the delivery was set to wait
ACKED = "acked"  # what ``_run`` answers when the turn's closing round trip acknowledged the delivery


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
        # each in-flight delivery's start (monotonic), until it ends or is reported as stuck
        self._started: dict[str, tuple[float, Delivery]] = {}
        self.retries = inbox.retries
        self.retry_window = RetryWindow.from_settings(settings)
        self._parked: dict[str, asyncio.TimerHandle] = {}  # waiting deliveries, until their next try
        self._due: list[Delivery] = []  # waiting deliveries whose next try has come
        self._slot = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._keeping = True  # the keep-alive loop's own stop, besides its cancel (see stop)
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
            # A cancel can be lost: on Python 3.11 a timeout inside the Redis client that expires as the cancel
            # arrives turns it into a TimeoutError, which the loop takes for a failed keep-alive. The flag
            # ends the loop after its sleep anyway (seen as a stop that hung in the inbox tests).
            self._keeping = False
            for task in keepers:
                task.cancel()
            await asyncio.gather(*keepers, return_exceptions=True)

    async def _drain_or_hand_back(self) -> None:
        pending = list(self._inflight.values())
        if pending:
            await asyncio.wait(pending, timeout=self.settings.turn_drain_timeout_s)
        for timer in self._parked.values():
            timer.cancel()
        waiting = [*self._parked, *(d.id for d in self._due)]  # the next consumer keeps them waiting
        self._parked.clear()
        self._due.clear()
        leftovers = dict(self._inflight)
        if waiting and not leftovers:
            try:
                await self.inbox.hand_back(waiting)
            except Exception:  # they stay pending and are reclaimed after inbox_reclaim_s
                log.exception("could not hand waiting deliveries back to the inbox")
        if leftovers:
            log.warning("handing %d unfinished turn(s) back to the inbox", len(leftovers))
            for task in leftovers.values():
                task.cancel()
            await asyncio.gather(*leftovers.values(), return_exceptions=True)
            try:
                await self.inbox.hand_back([*leftovers, *waiting])
            except Exception:  # the entries stay pending and are reclaimed after inbox_reclaim_s
                log.exception("could not hand turns back to the inbox")

    # -- reading ---------------------------------------------------------------------------------
    async def _read_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            free = self.capacity - len(self._inflight)
            while self._due and free > 0:
                self._spawn(self._due.pop(0))
                free -= 1
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
        if delivery.id in self._inflight or delivery.id in self._parked:
            # reclaimed from ourselves (a stalled loop let it idle): still running, or waiting here
            return
        task = asyncio.get_running_loop().create_task(self._consume(delivery), name=f"delivery {delivery.id}")
        self._inflight[delivery.id] = task
        self._started[delivery.id] = (time.monotonic(), delivery)

        def finished(_: asyncio.Task[None]) -> None:
            self._inflight.pop(delivery.id, None)
            self._started.pop(delivery.id, None)
            self._slot.set()

        task.add_done_callback(finished)

    async def _keep_alive(self) -> None:
        interval = max(0.05, self.settings.inbox_reclaim_s / 3)
        # No backoff here: a late keep-alive lets another consumer take over turns that are running.
        failures = FailureStreak("keep_alive", "keeping in-flight inbox entries alive", self.metrics)
        while self._keeping:
            await asyncio.sleep(interval)
            if not self._keeping:
                return
            try:
                lost = await self.inbox.keep(self.name, [*self._inflight, *self._parked, *(d.id for d in self._due)])
            except Exception as exc:
                failures.failed(exc)
            else:
                failures.succeeded()
                for entry_id in lost:  # fenced: its turn here will neither send, store nor acknowledge
                    log.warning("inbox entry %s was taken over by another consumer (this one stalled)", entry_id)
            self._report_stuck()

    def _report_stuck(self) -> None:
        """Log once each delivery whose work has run past ``inbox_stuck_warn_s``, with the awaits it is suspended
        in: the keep-alive keeps such an entry from being taken over, so a turn that makes no progress is
        otherwise silent until its process dies."""
        now = time.monotonic()
        stuck = [(i, s, d) for i, (s, d) in self._started.items() if now - s >= self.settings.inbox_stuck_warn_s]
        for entry_id, started, delivery in stuck:
            del self._started[entry_id]  # reported once
            log.warning("%s delivery %s (attempt %d) has run for %.1f s without finishing; it waits in: %s",
                        delivery.channel, delivery.dedup_id, delivery.attempts, now - started,
                        awaiting(self._inflight[entry_id]))

    # -- one delivery ----------------------------------------------------------------------------
    async def _consume(self, delivery: Delivery) -> None:
        handler = self.handlers.get(delivery.channel)
        if handler is None:
            await self._dead(delivery, f"no {delivery.channel!r} channel is configured in this process")
            return
        waiting: Waiting | None = None
        ran: bool | str = True
        try:
            # A delivery read for the first time has never failed, so it has no retry record to read.
            waiting = await self.retries.get(delivery.id) if delivery.attempts > 1 else None
            if waiting is not None and waiting.next_try_at > time.time() + EARLY_S:
                self._park(delivery, waiting.next_try_at)  # taken over before its time: it waits here now
                return
            if waiting is not None and waiting.resend is not None:
                if await self._waits_behind(delivery, waiting) or not await self._resend(handler, delivery, waiting):
                    return
            elif not (ran := await self._run(handler, delivery, waiting)):
                return
        except DeliveryRejected as exc:
            await self._dead(delivery, str(exc))
            return
        except Exception as exc:  # transient (Redis, the vendor away): tried again with backoff
            await self._failed(delivery, waiting, exc)
            return
        if ran == ACKED:
            return
        try:
            if waiting is not None:  # first: a record left behind would hold the chat's later deliveries
                await self.retries.clear(delivery)
            await self.inbox.done(delivery, self.name)
        except Exception:  # left pending: a later consumer finds the turn finished and only acks it
            log.exception("could not acknowledge %s delivery %s", delivery.channel, delivery.dedup_id)

    async def _run(self, handler: InboxHandler, delivery: Delivery, waiting: Waiting | None) -> bool | str:
        """Accept the delivery and run what it asks for; False when it waits to be tried again, ``ACKED``
        when its turn acknowledged it in its own closing round trip."""
        work = await self._accept(handler, delivery, waiting)
        if work == WAITS:
            return False
        if isinstance(work, TurnWork):
            queued = self._ack_with(work.turn, delivery) if waiting is None else []
            outcome = await self.runner.run_turn(work.turn, work.sink, self.inbox.fence(delivery, self.name))
            if outcome is not None and outcome.agent_message is not None and outcome.delivery.retryable:
                await self._undelivered(delivery, waiting, outcome.delivery, outcome.sent_text,
                                        outcome.agent_message.id)
                return False
            if outcome is not None and queued:  # the turn ran to its end: its closing round trip acked it
                return ACKED
        elif isinstance(work, SendWork):
            await self.runner.run_other(work.send(), work.what)
        return True

    def _ack_with(self, turn: Turn, delivery: Delivery) -> list[bool]:
        """Acknowledge the delivery in its turn's closing round trip, unless the vendor did not take the
        reply (it is sent again later). Returns a list that holds True once the ack is queued."""
        queued: list[bool] = []

        def ack(pipe) -> None:
            if not turn.trace.delivery_retryable:
                self.inbox.done_into(pipe, delivery, self.name)
                queued.append(True)

        turn.closing.append(ack)
        return queued

    async def _resend(self, handler: InboxHandler, delivery: Delivery, waiting: Waiting) -> bool:
        """Send the reply of a turn that ran before (not the turn again); False when it still fails."""
        assert waiting.resend is not None
        sink = handler.sink_for(delivery)
        message = None if waiting.message_id is None else await self.inbox.store.get_message(waiting.message_id)
        if message is not None and message.turn_id and isinstance(sink, IdempotentSink):
            # Under the turn's own key, as its first send: parts that went out then are not sent twice.
            report = await sink.deliver_keyed(waiting.resend, message.turn_id)
        else:
            report = await sink.deliver(waiting.resend)
        if not report.delivered:
            await self._undelivered(delivery, waiting, report)
            return False
        if message is not None:  # the transcript says it went out now
            message.delivery, message.delivery_error = DeliveryStatus.DELIVERED, None
            await self.inbox.store.update_message(message)
        log.info("%s delivery %s: its reply went out after %d failed attempt(s)", delivery.channel,
                 delivery.dedup_id, waiting.attempts)
        return True

    async def _waits_behind(self, delivery: Delivery, waiting: Waiting | None, first: list | None = None) -> bool:
        """The chat keeps its order: while an earlier delivery of it waits, this one waits behind it."""
        head = await self.retries.ahead_of(delivery, first)
        if head is None:
            return False
        await self._wait(delivery, waiting, BEHIND, (
            f"waiting behind {head.channel} delivery {head.dedup_id} of this chat, which waits for "
            f"{head.waiting_for} ({head.error_kind})"),
            # not before the head's next try, and never in a tight loop while the head is being tried
            next_try_at=max(head.next_try_at, time.time() + self.retry_window.first_s)
            + STEP_BEHIND_S * max(delivery.ticket - head.ticket, 1))
        return True

    async def _failed(self, delivery: Delivery, waiting: Waiting | None, exc: Exception) -> None:
        log.exception("%s delivery %s failed (attempt %d)", delivery.channel, delivery.dedup_id,
                      (waiting.attempts if waiting else 0) + 1, exc_info=exc)
        await self._wait(delivery, waiting, type(exc).__name__, str(exc))

    async def _undelivered(self, delivery: Delivery, waiting: Waiting | None, report: DeliveryReport,
                           text: str | None = None, message_id: str | None = None) -> None:
        """The turn ran but the vendor did not take its reply: send it again later (not the turn)."""
        await self._wait(delivery, waiting, "ReplyNotSent", report.error or "the channel did not take the reply",
                         resend=text, message_id=message_id)

    async def _wait(self, delivery: Delivery, before: Waiting | None, kind: str, error: str, *,
                    next_try_at: float | None = None, resend: str | None = None,
                    message_id: str | None = None) -> None:
        """Wait and try again, or dead-letter once the retry window is over."""
        try:
            waiting = await self.retries.wait(delivery, before, kind, error, next_try_at=next_try_at, resend=resend,
                                              message_id=message_id, window=self.retry_window)
            if waiting is None:
                attempts = before.attempts if before is not None else 0
                await self._dead(delivery, f"still failing after {self.settings.inbox_retry_window_s:g} s "
                                           f"(SWITCHBOARD_INBOX_RETRY_WINDOW_S), {attempts + 1} attempt(s): "
                                           f"{kind}: {scrubbed(error)}")
                return
        except Exception:  # Redis away: the entry stays pending and is taken up after inbox_reclaim_s
            log.exception("could not record why %s delivery %s waits", delivery.channel, delivery.dedup_id)
            return
        self.metrics.inbox_waiting.labels(delivery.channel).inc()
        log.warning("%s delivery %s waits (%s: %s); next try in %.1f s", delivery.channel, delivery.dedup_id,
                    waiting.error_kind, waiting.error, waiting.next_try_at - time.time())
        self._park(delivery, waiting.next_try_at)

    def _park(self, delivery: Delivery, at: float) -> None:
        """Keep the entry claimed (the keep-alive covers it) without a turn slot until it is due."""
        loop = asyncio.get_running_loop()
        retry = replace(delivery, attempts=delivery.attempts + 1)

        def due() -> None:
            self._parked.pop(delivery.id, None)
            running = self._inflight.get(delivery.id)
            if running is not None:  # due already while the attempt that parked it still winds up (it releases
                # the chat's order lock after parking): go on when it has ended, or _spawn would skip the retry
                running.add_done_callback(lambda _: due())
                return
            if len(self._inflight) < self.capacity and not self._stopping:
                self._spawn(retry)
            else:  # the read loop takes it up when a slot is free
                self._due.append(retry)
                self._slot.set()

        self._parked[delivery.id] = loop.call_later(max(0.0, at - time.time()), due)

    async def _accept(self, handler: InboxHandler, delivery: Delivery,
                      waiting: Waiting | None) -> Work | Literal["waits"] | None:
        if delivery.attempts > 1:
            turn = await self.inbox.accepted(delivery)
            if turn is not None:  # persisted by a consumer that went away: run it, do not store it again
                finished = await self.inbox.store.get_trace(turn.trace.turn_id)
                if finished is not None and finished.agent_message_id is not None:
                    if finished.delivery_retryable:  # it ran, but the vendor did not take the reply
                        return await self._undelivered_before(delivery, waiting, finished)
                    return None  # it had even replied; only its acknowledgement was lost
                return TurnWork(turn, handler.sink_for(delivery))
        async with self.inbox.order.hold(delivery.order_key, delivery.ticket, self.settings.turn_lock_ttl_s,
                                         lambda pipe: self.retries.ahead_of_into(pipe, delivery)) as held:
            # In the chat's order, so a delivery that failed just before this one is seen here.
            if await self._waits_behind(delivery, waiting, held.reads[0]):
                return WAITS
            stored: list[Turn] = []

            def keep(pipe, turn: Turn) -> None:
                # In the turn's opening round trip: the accepted turn and the chat's order lock's release.
                self.inbox.save_accepted_into(pipe, delivery, turn)
                self.inbox.order.release_into(pipe, held)
                stored.append(turn)

            try:
                with opening_writes(keep):
                    work = await handler.accept(delivery)
            except DeliveryRejected:
                raise
            except Exception as exc:  # recorded before the chat's next delivery is let in
                await self._failed(delivery, waiting, exc)
                return WAITS
            if isinstance(work, TurnWork):
                if stored and stored[0] is work.turn:  # accepted (so its opening round trip ran) with them
                    held.released = True
                    return work
                try:  # a channel that made its turn some other way: the same writes, in their own round trip
                    await held.stop_keeping()
                    pipe = self.inbox.redis.pipeline(transaction=False)
                    keep(pipe, work.turn)
                    await pipe.execute()
                    held.released = True
                except Exception:  # the turn does not run now: its retry accepts the message again
                    await self.runner.pipeline.abandon(work.turn)
                    raise
        return work

    async def _undelivered_before(self, delivery: Delivery, waiting: Waiting | None,
                                  finished: TurnTrace) -> Literal["waits"]:
        """A turn finished by a consumer that went away before it could record that the reply still
        had to go out: the reply waits to be sent again, as if that consumer had recorded it."""
        planned = await self.runner.pipeline.intents.earlier(finished.turn_id)
        if planned is None:  # the intent expired with the turn's other records: nothing left to send
            raise DeliveryRejected(f"turn {finished.turn_id}: its reply was not delivered and is no longer kept")
        report = DeliveryReport(delivered=False, error=finished.delivery_error, retryable=True)
        await self._undelivered(delivery, waiting, report, planned.text, planned.message_id)
        return WAITS

    async def _dead(self, delivery: Delivery, error: str) -> None:
        log.error("%s delivery %s dead-lettered: %s", delivery.channel, delivery.dedup_id, error)
        self.metrics.inbox_dead.labels(delivery.channel).inc()
        await self.inbox.dead_letter(delivery, error)
        await self.retries.clear(delivery)  # it no longer holds its chat's later deliveries

"""Ack fast, work after: a webhook accepts the turn, hands it here, and answers its vendor at once.

Every turn (and every canned vendor send a channel makes outside a turn) runs as a tracked
asyncio task. A task that fails is logged, counted and recorded on the turn's trace; on
shutdown in-flight work gets ``turn_drain_timeout_s`` to finish before it is cancelled, and a
cancelled turn is recorded too. Nothing is dropped silently.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Protocol, runtime_checkable

from gateway.conversation.store import RedisStore
from gateway.core.errors import TurnFenced
from gateway.core.metrics import Metrics
from gateway.turn.pipeline import Turn, TurnOutcome, TurnPipeline
from gateway.turn.ports import ReplySink
from gateway.turn.reply_intent import Fence

__all__ = ["ShowsTyping", "TurnRunner"]

log = logging.getLogger(__name__)


@runtime_checkable
class ShowsTyping(Protocol):
    """A sink that can show "typing…" while the reply is prepared (the indicator lapses by itself)."""

    typing_interval_s: float

    async def typing(self) -> None: ...


class TurnRunner:
    def __init__(
        self, pipeline: TurnPipeline, store: RedisStore, metrics: Metrics, *, drain_timeout_s: float = 20.0
    ) -> None:
        self.pipeline = pipeline
        self.store = store
        self.metrics = metrics
        self.drain_timeout_s = drain_timeout_s
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def schedule(self, turn: Turn, sink: ReplySink) -> asyncio.Task[TurnOutcome | None]:
        """Run ``pipeline.run(turn, sink)`` in the background; returns the task (callers may ignore it)."""
        return self._track(self.run_turn(turn, sink), f"turn {turn.trace.turn_id}")

    def spawn(self, work: Coroutine[Any, Any, None], *, what: str) -> asyncio.Task[None]:
        """Run a channel's own background send (a canned answer, a greeting), tracked like a turn."""
        return self._track(self.run_other(work, what), what)

    def _track(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def run_turn(self, turn: Turn, sink: ReplySink, fence: Fence | None = None) -> TurnOutcome | None:
        """Run a turn here and now; a failure is logged, counted and recorded, never raised."""
        typing = asyncio.create_task(self._keep_typing(sink)) if isinstance(sink, ShowsTyping) else None
        try:
            return await self.pipeline.run(turn, sink, fence)
        except TurnFenced as exc:  # another consumer runs it now: record nothing over its work
            log.warning("%s", exc)
            return None
        except asyncio.CancelledError:
            await self._record(turn, "turn cancelled at shutdown before it finished")
            raise
        except Exception as exc:  # the top of a background job: log, count, record on the trace
            log.exception("turn %s failed", turn.trace.turn_id)
            await self._record(turn, f"turn failed: {type(exc).__name__}: {exc}")
            return None
        finally:
            if typing is not None:
                typing.cancel()

    async def run_other(self, work: Coroutine[Any, Any, None], what: str) -> None:
        """Run a channel's own send; a failure is logged and counted, never raised."""
        try:
            await work
        except Exception:  # the top of a background job
            log.exception("%s failed", what)
            self.metrics.job_failures.labels("channel_send").inc()

    async def _keep_typing(self, sink: ShowsTyping) -> None:
        while True:
            try:
                await sink.typing()
            except Exception as exc:  # cosmetic: a missing indicator must never fail the turn
                log.info("typing indicator failed: %s", exc)
            await asyncio.sleep(sink.typing_interval_s)

    async def _record(self, turn: Turn, error: str) -> None:
        self.metrics.job_failures.labels("turn").inc()
        trace = turn.trace
        trace.error = f"{trace.error}; {error}" if trace.error else error
        try:
            await self.store.save_trace(trace)
        except Exception:  # the store itself is down: the log line above is the record left
            log.exception("could not record the failure of turn %s", trace.turn_id)

    async def drain(self, timeout_s: float | None = None) -> bool:
        """Wait for in-flight work (including work it starts meanwhile); True when none is left."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.drain_timeout_s if timeout_s is None else timeout_s)
        current = asyncio.current_task()
        while pending := [t for t in self._tasks if t is not current]:
            left = deadline - loop.time()
            if left <= 0:
                return False
            await asyncio.wait(pending, timeout=left)
        return True

    async def stop(self) -> None:
        if await self.drain():
            return
        leftovers = list(self._tasks)
        log.warning("cancelling %d background turn(s) still running at shutdown", len(leftovers))
        for task in leftovers:
            task.cancel()
        await asyncio.gather(*leftovers, return_exceptions=True)

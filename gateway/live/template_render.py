"""Template rendering with a budget: off the event loop, stopped at a deadline, its output capped.

A template is operator code that runs on every turn. Each render runs in a thread apart so a slow
one never holds the event loop (health checks, other conversations); the threads are kept and reused
(starting one cost every turn about 0.3 ms of the loop's CPU). asyncio cannot cancel a pure-Python loop
in a thread, so at the deadline the thread is sent an asynchronous exception
(``PyThreadState_SetAsyncExc``): the render ends at its next bytecode, stops using the CPU, and its
thread goes back to waiting for the next render. The output is
streamed with ``Template.generate()`` and refused as soon as it passes the cap; what a single
expression may build is bounded by ``template_sandbox``.
"""

from __future__ import annotations

import asyncio
import ctypes
import queue
import threading
import traceback
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from jinja2 import Template

from gateway.core.settings import Settings
from gateway.live.template_sandbox import DEFAULT_MAX_OUTPUT_CHARS, OverBudget, value_limit

DEFAULT_TIMEOUT_S = 1.0
STOP_GRACE_S = 1.0  # how long the caller waits for a stopped thread before leaving it behind
MAX_IDLE_THREADS = 4  # render threads kept waiting between renders; more end when their render does


@dataclass(frozen=True)
class RenderBudget:
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS

    @classmethod
    def from_settings(cls, settings: Settings) -> RenderBudget:
        return cls(settings.template_render_timeout_s, settings.template_max_output_chars)

    def over_time(self, line: int | None = None) -> OverBudget:
        where = f" (it was at line {line})" if line else ""
        return OverBudget("time", f"rendering took longer than the budget of {self.timeout_s:g} s "
                                  f"(SWITCHBOARD_TEMPLATE_RENDER_TIMEOUT_S) and was stopped{where}")

    def over_output(self) -> OverBudget:
        return OverBudget("output", f"the output is longer than the budget of {self.max_output_chars} "
                                    "characters (SWITCHBOARD_TEMPLATE_MAX_OUTPUT_CHARS)")


class _Stop(BaseException):
    """Raised inside the rendering thread at the deadline. A BaseException, so no ``except Exception``
    in jinja or in anything a template calls can swallow it."""


def template_line(exc: BaseException) -> int | None:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<template>"]
    return frames[-1].lineno if frames else None


class _Render:
    def __init__(self, template: Template, variables: dict[str, Any], budget: RenderBudget) -> None:
        self.template = template
        self.variables = variables
        self.budget = budget
        self.result: Future[str] = Future()
        self._lock = threading.Lock()
        self._running = False
        self._stopped = False
        self._thread_id: int | None = None

    def run(self) -> None:
        """In a render thread; every exception, a late ``_Stop`` included, ends up in ``result``."""
        try:
            try:
                with self._lock:
                    if self._stopped:  # its deadline passed before a thread took it
                        raise _Stop
                    self._thread_id, self._running = threading.get_ident(), True
                value_limit.set(self.budget.max_output_chars)
                text = self._generate()
            finally:
                with self._lock:  # from here on ``stop`` leaves this thread alone
                    self._running = False
            self.result.set_result(text)
        except _Stop as exc:
            if not self.result.done():
                # jinja maps lines only for the exceptions it handles; this one it lets through.
                line = template_line(exc)
                line = self.template.get_corresponding_lineno(line) if line else None
                self.result.set_exception(self.budget.over_time(line))
        except BaseException as exc:  # handed to the awaiting caller, like any executor
            if not self.result.done():
                self.result.set_exception(exc)

    def _generate(self) -> str:
        parts: list[str] = []
        size = 0
        for part in self.template.generate(**self.variables):
            size += len(part)
            if size > self.budget.max_output_chars:
                raise self.budget.over_output()
            parts.append(part)
        return "".join(parts)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            if self._running and self._thread_id is not None:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._thread_id), ctypes.py_object(_Stop))


class _RenderThreads:
    """Threads that wait for renders. A render goes to an idle thread, or to a new one when none is idle
    (a render still stuck in one long C call past its deadline keeps its thread, and others go on)."""

    def __init__(self, max_idle: int = MAX_IDLE_THREADS) -> None:
        self._max_idle = max_idle
        self._idle: list[queue.SimpleQueue[_Render]] = []
        self._guard = threading.Lock()

    def submit(self, job: _Render) -> None:
        with self._guard:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name="template-render", daemon=True).start()
        inbox.put(job)

    def _serve(self, inbox: queue.SimpleQueue[_Render]) -> None:
        while True:
            job = inbox.get()
            try:
                job.run()
            except _Stop:  # belt and braces: ``run`` handles its own stop
                pass
            with self._guard:
                if len(self._idle) >= self._max_idle:
                    return
                self._idle.append(inbox)


_THREADS = _RenderThreads()


def _consume(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()  # a result nobody waits for any more is not an "unretrieved" error


async def render(template: Template, variables: dict[str, Any], budget: RenderBudget) -> str:
    """The rendered text; ``OverBudget`` (``limit`` = ``time``/``output``/``value``) past the budget."""
    job = _Render(template, variables, budget)
    _THREADS.submit(job)
    waiter = asyncio.wrap_future(job.result)
    waiter.add_done_callback(_consume)
    try:
        return await asyncio.wait_for(asyncio.shield(waiter), budget.timeout_s)
    except TimeoutError:
        job.stop()
        # The thread ends at its next bytecode; one long C call (a huge regex) is not waited for long.
        await asyncio.wait({waiter}, timeout=STOP_GRACE_S)
        if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
            return waiter.result()  # it finished just as the deadline passed
        error = waiter.exception() if waiter.done() and not waiter.cancelled() else None
        raise error if isinstance(error, OverBudget) else budget.over_time() from None
    except asyncio.CancelledError:
        job.stop()
        raise

"""Where a task is suspended: the chain of awaits from its coroutine down to what it waits on.

``asyncio.Task.get_stack()`` gives one frame for a suspended coroutine; ``awaiting(task)`` follows
``cr_await`` to the innermost frame and, when that awaits another task, goes on into it, so a log line
can say where work that makes no progress is stuck.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

__all__ = ["awaiting"]


def awaiting(task: asyncio.Task, limit: int = 60) -> str:
    """``outer (file.py:12) → inner (file.py:34) → … → task 'name' → … → Future``; ``(not suspended)``
    for a task that is done."""
    links: list[str] = []
    current: asyncio.Task | None = task
    while current is not None and not current.done() and len(links) < limit:
        coro = current.get_coro()
        while len(links) < limit:
            frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
            if frame is None:
                break
            links.append(f"{frame.f_code.co_qualname} ({Path(frame.f_code.co_filename).name}:{frame.f_lineno})")
            coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None)
        waiter = getattr(current, "_fut_waiter", None)  # the future the task is suspended on (asyncio keeps it)
        if isinstance(waiter, asyncio.Task):
            links.append(f"task {waiter.get_name()!r}")
            current = waiter
        else:
            if waiter is not None:
                links.append(type(waiter).__name__)
            current = None
    return " → ".join(links) or "(not suspended)"

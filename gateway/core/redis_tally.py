"""Redis round trips and client CPU per turn, counted by the connection itself (no MONITOR needed).

``tallying(pool)`` swaps the pool's connection class for a subclass that counts each packed send
(a pipeline is one) and the process CPU spent from the send until its reply is parsed, into the
``RedisTally`` of the running task's context; a turn opens one with ``counting()``. Outside a turn
nothing is counted. The CPU includes whatever else the loop ran while the reply was awaited, so it
is exact only when turns do not overlap (as in the benchmark's serial phase).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from redis.asyncio import ConnectionPool

__all__ = ["RedisTally", "counting", "tallying"]


@dataclass
class RedisTally:
    round_trips: int = 0
    cpu_s: float = 0.0


_current: ContextVar[RedisTally | None] = ContextVar("redis_tally", default=None)


@contextmanager
def counting() -> Iterator[RedisTally]:
    """Count the Redis round trips of this task (and of the tasks it starts) until the block ends."""
    tally = RedisTally()
    token = _current.set(tally)
    try:
        yield tally
    finally:
        _current.reset(token)


class _Tallying:
    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        tally = _current.get()
        if tally is not None:
            tally.round_trips += 1
            t0 = time.process_time()
            try:
                return await super().send_packed_command(command, check_health)  # type: ignore[misc]
            finally:
                tally.cpu_s += time.process_time() - t0
        return await super().send_packed_command(command, check_health)  # type: ignore[misc]

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        tally = _current.get()
        if tally is None:
            return await super().read_response(*args, **kwargs)  # type: ignore[misc]
        t0 = time.process_time()
        try:
            return await super().read_response(*args, **kwargs)  # type: ignore[misc]
        finally:
            tally.cpu_s += time.process_time() - t0


def tallying(pool: ConnectionPool) -> ConnectionPool:
    """The pool, its connections now counting (whatever class the URL chose: TCP, TLS, unix socket)."""
    base = pool.connection_class
    pool.connection_class = type(f"Tallying{base.__name__}", (_Tallying, base), {})
    return pool

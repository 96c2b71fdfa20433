"""Where RQ job functions find the services of the process they run in.

Jobs are thin (ids in → service call) and synchronous, as RQ wants; the services are async and
bound to one event loop. A job hands its coroutine to that loop and waits: in the embedded
gateway it is the server's loop (so jobs share the one local-mode Qdrant client), in
``switchboard worker`` a loop thread of its own.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from gateway.services import Services

T = TypeVar("T")

_runtimes: dict[str, tuple[Services, asyncio.AbstractEventLoop]] = {}
_lock = threading.Lock()


def register(services: Services, loop: asyncio.AbstractEventLoop) -> None:
    with _lock:
        _runtimes[services.settings.agent_id] = (services, loop)


def unregister(agent_id: str) -> None:
    with _lock:
        _runtimes.pop(agent_id, None)


def run_job(agent_id: str, work: Callable[[Services], Awaitable[T]], timeout_s: float = 300) -> T:
    """Run ``work(services)`` on the owning loop from a worker thread; re-raise its error for RQ."""
    with _lock:
        try:
            services, loop = _runtimes[agent_id]
        except KeyError:
            raise RuntimeError(f"no services registered for agent {agent_id!r} in this process") from None

    async def call() -> T:
        return await work(services)

    return asyncio.run_coroutine_threadsafe(call(), loop).result(timeout_s)

"""Background jobs by name: RQ runs ``run_job(agent_id, name, *args)``, the process that owns the
services runs the handler registered under that name.

Jobs are thin (ids in → service call) and synchronous, as RQ wants; the services are async and
bound to one event loop. The composition root registers each agent's handlers with its loop; a
job hands its coroutine to that loop and waits: in the embedded gateway it is the server's loop
(so jobs share the one local-mode Qdrant client), in ``switchboard worker`` a loop thread of its
own. Names, not functions, are what the queues store, so this layer knows nothing of the
services above it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from gateway.core.errors import SwitchboardError

__all__ = ["JobHandler", "UnknownJob", "register", "run_job", "unregister"]

JobHandler = Callable[..., Awaitable[Any]]


class UnknownJob(SwitchboardError):
    """No handler of that name (or no services at all) for the agent in this process."""


_agents: dict[str, tuple[Mapping[str, JobHandler], asyncio.AbstractEventLoop]] = {}
_lock = threading.Lock()


def register(agent_id: str, loop: asyncio.AbstractEventLoop, handlers: Mapping[str, JobHandler]) -> None:
    with _lock:
        _agents[agent_id] = (dict(handlers), loop)


def unregister(agent_id: str) -> None:
    with _lock:
        _agents.pop(agent_id, None)


def run_job(agent_id: str, name: str, *args: Any, timeout_s: float = 300) -> Any:
    """The one RQ job function: run handler ``name`` on its owning loop; re-raise its error for RQ."""
    with _lock:
        try:
            handlers, loop = _agents[agent_id]
        except KeyError:
            raise UnknownJob(f"no services registered for agent {agent_id!r} in this process") from None
    try:
        handler = handlers[name]
    except KeyError:
        raise UnknownJob(f"no job named {name!r} for agent {agent_id!r}") from None
    return asyncio.run_coroutine_threadsafe(handler(*args), loop).result(timeout_s)

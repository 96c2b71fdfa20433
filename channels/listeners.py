"""Long-lived listeners, one per enabled connection of a kind, each held open by one replica.

Most kinds are pushed to (a vendor posts to our webhook). A few must hold something open instead: a
mailbox watched with IMAP IDLE, a bot's Discord Gateway WebSocket. ``ConnectionListeners`` keeps one
``listen(connection)`` running per enabled connection of its kind across all replicas: each replica
follows the connections (re-read every ``poll_s``, so an operator's change is seen within it), and for
each tries the connection's Redis lease (``gateway.jobs.lease``); the holder runs the listener and
renews the lease, and when it dies another replica takes over within one lease. A connection that is
changed, disabled or deleted has its listener stopped (and started again with the change).

A kind's vendor module creates one in its ``build_connections(context)`` and calls ``start()``; its
handler's ``stop()`` calls ``stop()``. Only serving processes hold listeners (``holds_listeners``): a
``switchboard worker`` builds the kind's handler to answer deliveries and starts none.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from gateway.channel import ChannelContext, Connection, Lease, run_while_held, stopping

__all__ = ["ConnectionListeners"]

log = logging.getLogger(__name__)

Listen = Callable[[Connection], Awaitable[None]]


class ConnectionListeners:
    def __init__(self, context: ChannelContext, kind: str, listen: Listen, *, lease_s: float = 15.0,
                 poll_s: float | None = None) -> None:
        self.context = context
        self.kind = kind
        self.listen = listen
        self.lease_s = lease_s  # a dead holder's listener is taken over within this (plus ``poll_s``)
        self.poll_s = context.settings.connection_listeners_poll_s if poll_s is None else poll_s
        self._tasks: dict[str, tuple[Connection, asyncio.Task[None]]] = {}
        self._follower: asyncio.Task[None] | None = None

    def start(self) -> None:
        if not self.context.holds_listeners:  # a worker: the serving processes hold the listeners
            return
        if self._follower is None and self.context.connections is not None:
            self._follower = asyncio.create_task(self._follow(), name=f"{self.kind}-listeners")

    async def stop(self) -> None:
        tasks = [task for _, task in self._tasks.values()] + ([self._follower] if self._follower else [])
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # each frees its lease for another replica
        self._tasks.clear()
        self._follower = None

    def holding(self) -> list[str]:
        """The connections whose listener this process runs or waits to run (for status and tests)."""
        return sorted(self._tasks)

    async def _follow(self) -> None:
        assert self.context.connections is not None
        while True:
            stopping()  # a cancellation a Redis command swallowed
            try:
                connections = [c for c in await self.context.connections.list() if c.kind == self.kind]
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis away: keep what runs (the leases fence it), look again later
                log.warning("%s listeners: could not read the connections (%s)", self.kind, exc)
            else:
                self._align([c for c in connections if c.enabled])
            await asyncio.sleep(self.poll_s)

    def _align(self, connections: list[Connection]) -> None:
        wanted = {c.id: c for c in connections}
        for connection_id, (known, task) in list(self._tasks.items()):
            now = wanted.get(connection_id)
            if now is None or now.updated_at != known.updated_at or task.done():
                task.cancel()
                del self._tasks[connection_id]
        for connection in connections:
            if connection.id in self._tasks:
                continue
            store = self.context.store
            lease = Lease(store.redis, store.key("listener", self.kind, connection.id), ttl_s=self.lease_s)

            async def work(connection: Connection = connection) -> None:
                await self.listen(connection)

            task = asyncio.create_task(run_while_held(lease, work, name=f"{self.kind}:{connection.id}"),
                                       name=f"{self.kind}-listener-{connection.id}")
            self._tasks[connection.id] = (connection, task)

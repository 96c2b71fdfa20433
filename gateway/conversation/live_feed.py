"""What happens in conversations, as it happens: every stored message and every handoff change is
published on one Redis channel (``RedisStore.live_channel``); this process listens on it once and
fans each event out to its local listeners (console pages over SSE, open web-chat sockets).

One subscription per process, not one per listener: a thousand open chat pages cost one Redis
connection. The subscription runs while anyone listens and reconnects by itself after Redis
comes back; events published while it was away are not replayed (pages re-read what they show).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

from gateway.conversation.store import RedisStore

log = logging.getLogger(__name__)

QUEUE_SIZE = 256  # events a slow listener may fall behind by; past it the oldest are dropped for it


class LiveFeed:
    def __init__(self, store: RedisStore) -> None:
        self.store = store
        self._listeners: set[asyncio.Queue[dict[str, Any]]] = set()
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()

    @asynccontextmanager
    async def listen(self) -> AsyncIterator[asyncio.Queue[dict[str, Any]]]:
        """A queue of events (dicts) for as long as the block runs."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(QUEUE_SIZE)
        self._listeners.add(queue)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="live feed")
        try:
            yield queue
        finally:
            self._listeners.discard(queue)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        delay = 0.2
        while self._listeners:
            try:
                await self._subscribe()
                delay = 0.2
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis away: listeners keep their pages; try again shortly
                self.connected.clear()
                log.warning("live feed: %s; reconnecting in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        self.connected.clear()

    async def _subscribe(self) -> None:
        pubsub = self.store.redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self.store.live_channel)
            self.connected.set()
            while self._listeners:
                message = await pubsub.get_message(timeout=1.0)
                if message is None or message.get("type") != "message":
                    continue
                try:
                    event = json.loads(message["data"])
                except ValueError:
                    continue
                for queue in list(self._listeners):
                    if queue.full():
                        with suppress(asyncio.QueueEmpty):
                            queue.get_nowait()
                    queue.put_nowait(event)
        finally:
            self.connected.clear()
            with suppress(Exception):
                await pubsub.aclose()

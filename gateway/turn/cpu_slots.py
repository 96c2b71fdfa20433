"""A bounded number of turns in their CPU-heavy phases at once, so acks in the same process stay fast.

One process both acknowledges webhooks and runs turns (the default ``switchboard serve``). A burst of
deliveries starts dozens of turns, and every step of each (a Redis reply parsed, a persona validated)
queues on the event loop in front of the acks arriving meanwhile. A turn holds a slot only while it
does loop work back to back (accepting a message, reading its memory, building its prompt) and never
while it waits on something slow (the conversation's lock, retrieval, the LLM, the vendor), so a bound
of a few slots costs a turn no throughput and leaves the loop to the acks for the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["CpuSlots"]


class CpuSlots:
    def __init__(self, slots: int) -> None:
        self.slots = slots  # 0: no bound
        self._gate = asyncio.Semaphore(slots) if slots > 0 else None
        self.waited = 0  # times a turn found every slot taken (the tests and the benchmark read it)

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """Never nest two holds in one task: the inner one could wait for a slot its own outer one holds."""
        if self._gate is None:
            yield
            return
        if self._gate.locked():
            self.waited += 1
        async with self._gate:
            yield

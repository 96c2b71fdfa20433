"""Turn consumers on a real Redis for the channel tests: services that do not consume by themselves,
and a second consumer that takes a delivery over."""

from __future__ import annotations

import asyncio
import time

from channels.registry import install_worker
from gateway.inbox.consumer import InboxConsumer
from gateway.inbox.stream import Inbox
from gateway.services import Services


async def until(check, timeout_s: float, what: str, seen=None) -> None:
    """Wait for ``check``; on a time-out say what ``seen()`` (if given) shows instead."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}" + (f"; seen: {seen()!r}" if seen else ""))
        await asyncio.sleep(0.02)


def build_services(channel_settings) -> Services:
    """Services whose deliveries wait for the test's own consumers; a quiet entry is reclaimed after 0.3 s."""
    built = Services.build(channel_settings.model_copy(update={"inbox_reclaim_s": 0.3}), consume_inbox=False)
    install_worker(built.channel_context())
    return built


def consumer(services: Services, inbox: Inbox | None = None) -> InboxConsumer:
    return InboxConsumer(inbox or services.inbox, services.turns, services.settings, services.metrics,
                         handlers=services.inbox_handlers)


async def take_over(services: Services, channel: str = "telegram") -> None:
    """A fresh consumer reclaims the one delivery left pending, runs it, and the inbox ends up empty."""
    taking_over = consumer(services)
    await taking_over.start()
    try:
        await until(lambda: services.metrics.inbox_reclaimed.labels(channel)._value.get() == 1, 5,
                    "the delivery to be taken over")
        await until(lambda: taking_over.in_flight == 0, 10, "the resumed turn to finish")
    finally:
        await taking_over.stop()
    assert await services.redis.xlen(services.inbox.stream) == 0

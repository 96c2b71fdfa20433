"""The one retry helper for outbound vendor calls: bounded tries, ``retry_after`` honoured.

Each call site owns its attempt counter (no state is shared between sends). Only
``ChannelRateLimited`` and ``ChannelUnavailable`` are retried; ``ChannelRejected`` and anything
else propagate at once. After the last try the last error propagates.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from channels.errors import ChannelRateLimited, ChannelUnavailable
from gateway.channel import Settings

__all__ = ["RetryPolicy", "send_with_retry"]

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    tries: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    @classmethod
    def from_settings(cls, settings: Settings) -> RetryPolicy:
        return cls(settings.channel_send_tries, settings.channel_retry_base_s, settings.channel_retry_max_s)

    def delay(self, attempt: int, error: Exception) -> float:
        """Seconds to wait after failed ``attempt`` (1-based)."""
        if isinstance(error, ChannelRateLimited) and error.retry_after_s is not None:
            return min(max(error.retry_after_s, 0.0), self.max_delay_s)
        backoff = self.base_delay_s * 2 ** (attempt - 1)
        return min(backoff * random.uniform(0.8, 1.2), self.max_delay_s)


async def send_with_retry(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    what: str = "send",
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    for attempt in range(1, policy.tries + 1):
        try:
            return await call()
        except (ChannelRateLimited, ChannelUnavailable) as exc:
            if attempt == policy.tries:
                raise
            wait = policy.delay(attempt, exc)
            log.warning("%s failed (try %d/%d): %s; retrying in %.2fs", what, attempt, policy.tries, exc, wait)
            await sleep(wait)
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

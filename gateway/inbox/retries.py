"""Deliveries that wait out a vendor outage: retried with backoff over a window, then dead-lettered.

A delivery whose processing fails for a reason that may pass (the vendor answers 5xx or cannot be
reached, Redis blinked) is not dead-lettered: it waits, and is tried again after an exponential
backoff with jitter, capped at ``max_s``, until ``window_s`` has passed since it first failed; its
last try falls on the window's end. What it waits for is recorded (the error's kind and message, the
attempts, the first failure and the next try) and shown by ``GET /api/inbox`` and the console.

A chat keeps its order while one of its deliveries waits: its later deliveries wait behind it (and
say so), each a moment after the one before it, so they are answered in arrival order once the
vendor is back. Each chat's waiting deliveries are a sorted set scored by their order ticket.
"""

from __future__ import annotations

import json
import random
import re
import time
from dataclasses import asdict, dataclass

from redis.asyncio import Redis

from gateway.conversation.store import RedisStore
from gateway.core.settings import Settings
from gateway.inbox.delivery import Delivery

__all__ = ["Backoff", "RetryWindow", "Retries", "Waiting", "scrubbed"]

BEHIND = "WaitingBehind"  # the error kind of a delivery waiting behind an earlier one of its chat
STEP_BEHIND_S = 0.25  # a chat's waiting deliveries are retried this far apart, in ticket order
_BOT_TOKEN = re.compile(r"\d{5,}:[A-Za-z0-9_-]{20,}")  # a Telegram bot token inside a URL or message
_KEEP_EXTRA_S = 3600  # the records outlive the window by this much (then a stale one cannot block a chat)


def scrubbed(message: str, limit: int = 500) -> str:
    """An error message fit to store and show: no bot token, one line, bounded."""
    return " ".join(_BOT_TOKEN.sub("<token>", message).split())[:limit]


@dataclass(frozen=True)
class Backoff:
    """How long a failing step waits before it tries again: ``first_s``, doubled per failure in a
    row, at most ``max_s``; a success starts it over."""

    first_s: float = 0.5
    max_s: float = 30.0

    def delay(self, failures: int) -> float:
        return min(self.first_s * 2 ** min(max(failures - 1, 0), 32), self.max_s)


@dataclass(frozen=True)
class RetryWindow:
    window_s: float = 1800.0
    first_s: float = 2.0
    max_s: float = 300.0

    @classmethod
    def from_settings(cls, settings: Settings) -> RetryWindow:
        return cls(settings.inbox_retry_window_s, settings.inbox_retry_first_s, settings.inbox_retry_max_s)

    def delay(self, failures: int) -> float:
        """Seconds before the next try after ``failures`` (1-based) failures in a row."""
        doubled = Backoff(self.first_s, max_s=float("inf")).delay(failures)  # capped after the jitter
        return min(doubled * random.uniform(0.8, 1.2), self.max_s)


@dataclass(frozen=True)
class Waiting:
    """Why a delivery is waiting and when it will be tried again (times are unix seconds)."""

    entry: str
    channel: str
    dedup_id: str
    order_key: str
    ticket: int
    attempts: int
    first_failure_at: float
    next_try_at: float
    error_kind: str
    error: str
    resend: str | None = None  # the reply text still to be sent: the turn ran, only its delivery failed
    message_id: str | None = None  # the stored reply, marked delivered once it goes out

    @property
    def waiting_for(self) -> str:
        if self.error_kind == BEHIND:
            return "an earlier delivery of this chat"
        return "its reply to be sent" if self.resend is not None else "its turn to be accepted"

    def public(self) -> dict:
        shown = {k: v for k, v in asdict(self).items() if k not in ("resend", "message_id")}
        return {**shown, "waiting_for": self.waiting_for}


class Retries:
    def __init__(self, redis: Redis, store: RedisStore, stream: str, window: RetryWindow) -> None:
        self.redis = redis
        self.stream = stream
        self.window = window
        self.records = store.key("inbox", "waiting")
        self._chat_prefix = store.key("inbox", "waiting", "chat", "")
        self._ttl_s = int(window.window_s + _KEEP_EXTRA_S)

    def _chat(self, order_key: str) -> str:
        return self._chat_prefix + order_key

    async def get(self, entry_id: str) -> Waiting | None:
        raw = await self.redis.hget(self.records, entry_id)
        return None if raw is None else Waiting(**json.loads(raw))

    def ahead_of_into(self, pipe, delivery: Delivery) -> None:
        """Queue ``ahead_of``'s first read in ``pipe`` (with the chat's order lock); pass its answer as ``first``."""
        pipe.zrangebyscore(self._chat(delivery.order_key), "-inf", f"({delivery.ticket}", start=0, num=1)

    async def ahead_of(self, delivery: Delivery, first: list[bytes] | None = None) -> Waiting | None:
        """The earliest waiting delivery of this chat that arrived before ``delivery``, if any."""
        chat = self._chat(delivery.order_key)
        while True:
            if first is not None:
                ids, first = first, None
            else:
                ids = await self.redis.zrangebyscore(chat, "-inf", f"({delivery.ticket}", start=0, num=1)
            if not ids:
                return None
            entry = ids[0].decode()
            head = await self.get(entry)
            if (head is not None and time.time() - head.first_failure_at < self._ttl_s
                    and await self.redis.xrange(self.stream, min=entry, max=entry)):
                return head
            # its record is gone or stale, or its entry left the inbox: it no longer holds the chat
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.zrem(chat, entry)
                pipe.hdel(self.records, entry)
                await pipe.execute()

    async def wait(self, delivery: Delivery, before: Waiting | None, kind: str, error: str, *,
                   window: RetryWindow | None = None,
                   next_try_at: float | None = None, resend: str | None = None, message_id: str | None = None,
                   now: float | None = None) -> Waiting | None:
        """Record one more failure; None when the window is over (the caller dead-letters)."""
        now = time.time() if now is None else now
        window = window or self.window
        first = before.first_failure_at if before is not None else now
        attempts = (before.attempts if before is not None else 0) + (kind != BEHIND)
        if now - first >= window.window_s:
            return None
        if next_try_at is None:
            next_try_at = now + window.delay(max(attempts, 1))
        if resend is None and before is not None:
            resend, message_id = before.resend, before.message_id
        waiting = Waiting(
            entry=delivery.id, channel=delivery.channel, dedup_id=delivery.dedup_id, order_key=delivery.order_key,
            ticket=delivery.ticket, attempts=attempts, first_failure_at=first,
            next_try_at=min(next_try_at, first + window.window_s), error_kind=kind, error=scrubbed(error),
            resend=resend, message_id=message_id,
        )
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(self.records, delivery.id, json.dumps(asdict(waiting)))
            pipe.zadd(self._chat(delivery.order_key), {delivery.id: delivery.ticket})
            pipe.expire(self._chat(delivery.order_key), self._ttl_s)
            await pipe.execute()
        return waiting

    async def clear(self, delivery: Delivery) -> None:
        """The delivery is done (answered or dead-lettered): it no longer holds its chat."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hdel(self.records, delivery.id)
            pipe.zrem(self._chat(delivery.order_key), delivery.id)
            await pipe.execute()

    async def all(self, count: int = 100) -> list[Waiting]:
        """Waiting deliveries, the next to be tried first."""
        rows = [Waiting(**json.loads(raw)) for raw in (await self.redis.hgetall(self.records)).values()]
        return sorted(rows, key=lambda w: w.next_try_at)[:count]

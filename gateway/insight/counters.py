"""Hourly counters: one Redis hash per hour, one field per measure and (agent, channel, connection).

A report over a range reads one hash per hour in it (a month is 720 small hashes in one round trip),
whatever the number of conversations behind them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from gateway.conversation.store import RedisStore

__all__ = ["MEASURES", "Dims", "HourlyCounters", "hour_of", "hours_between"]

# What is counted. Outcomes are counted once per conversation, feedback once per vote (a changed vote
# moves its count), tokens and cost per model call; cost in billionths of the currency unit.
MEASURES = ("conversations", "turns", "resolved", "handed_off", "unanswered", "abandoned", "up", "down",
            "comments", "prompt", "completion", "cost_nano", "unpriced")
SEP = "|"


def _clean(value: str | None) -> str:
    return (value or "").replace(SEP, "_")


@dataclass(frozen=True)
class Dims:
    """Where it happened: the answering agent ("" the channels' agent), the channel, the connection ("" the
    environment's own)."""

    agent: str = ""
    channel: str = ""
    connection: str = ""

    @classmethod
    def of(cls, agent: str | None, channel: str | None, connection: str | None) -> Dims:
        return cls(_clean(agent), _clean(channel), _clean(connection))

    @property
    def suffix(self) -> str:
        return f"{SEP}{self.agent}{SEP}{self.channel}{SEP}{self.connection}"

    @classmethod
    def parse(cls, suffix: str) -> Dims:
        _, agent, channel, connection = (suffix.split(SEP) + ["", "", "", ""])[:4]
        return cls(agent, channel, connection)

    def matches(self, agent: str | None, channel: str | None, connection: str | None) -> bool:
        return ((agent is None or self.agent == agent) and (channel is None or self.channel == channel)
                and (connection is None or self.connection == connection))


def hour_of(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y%m%d%H")


def hours_between(start: datetime, end: datetime) -> Iterator[datetime]:
    """Every hour from ``start``'s to ``end``'s, both included."""
    at = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    while at <= end:
        yield at
        at += timedelta(hours=1)


class HourlyCounters:
    def __init__(self, store: RedisStore, retention_days: int) -> None:
        self.store = store
        self.ttl_s = retention_days * 86_400

    def key(self, hour: str) -> str:
        return self.store.key("insight", "h", hour)

    def add_into(self, pipe, at: datetime, dims: Dims, counts: dict[str, int]) -> None:
        key = self.key(hour_of(at))
        for measure, n in counts.items():
            if n:
                pipe.hincrby(key, f"{measure}{dims.suffix}", n)
        pipe.expire(key, self.ttl_s)

    async def add(self, at: datetime, dims: Dims, counts: dict[str, int]) -> None:
        pipe = self.store.redis.pipeline(transaction=False)
        self.add_into(pipe, at, dims, counts)
        await pipe.execute()

    async def read(self, hours: Iterable[datetime]) -> list[tuple[datetime, dict[str, int]]]:
        """Each hour's raw fields (``measure|agent|channel|connection`` -> count), one round trip."""
        hours = list(hours)
        pipe = self.store.redis.pipeline(transaction=False)
        for at in hours:
            pipe.hgetall(self.key(hour_of(at)))
        answers = await pipe.execute()
        return [(at, {k.decode(): int(v) for k, v in raw.items()}) for at, raw in zip(hours, answers, strict=True)]

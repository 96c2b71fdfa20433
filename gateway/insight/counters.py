"""The insight counters: one Redis hash per UTC day, one field per measure and (agent, channel,
connection), plus the day's turns by hour.

A report over a range sums one hash per day in it, in Redis (a month is 30 hashes in one round trip),
whatever the number of conversations behind them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from gateway.conversation.store import RedisStore

__all__ = ["MEASURES", "DailyCounters", "Dims", "day_of", "days_between"]

# What is counted. Outcomes are counted once per conversation, feedback once per vote (a changed vote
# moves its count), tokens and cost per model call; cost in billionths of the currency unit; closing-question
# answers (CSAT) as a count and the sum of their 1-5 scores.
MEASURES = ("conversations", "turns", "resolved", "handed_off", "unanswered", "abandoned", "up", "down",
            "comments", "prompt", "completion", "cost_nano", "unpriced", "csat", "csat_sum")
BREAKDOWN = ("conversations", "turns", "prompt", "completion", "cost_nano")  # per agent, channel, connection
KEY_MEASURES = ("turns", "prompt", "completion", "cost_nano")  # what is counted per agent API key
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


def day_of(at: datetime) -> date:
    return at.astimezone(UTC).date()


def days_between(first: date, last: date) -> Iterator[date]:
    day = first
    while day <= last:
        yield day
        day += timedelta(days=1)


@dataclass
class DayCounts:
    day: date
    counts: dict[str, int]  # measure -> its sum over the matching (agent, channel, connection)
    turns_by_hour: list[int]  # turns per hour of the day (UTC)


class DailyCounters:
    """One hash per UTC day: ``measure|agent|channel|connection`` for every measure and for the day's turns
    by hour (``turns@HH``), and each also without the suffix (the day's total, for a report without
    filters). The (agent, channel, connection) seen are kept in a set, so a report asks for exactly its
    fields."""

    def __init__(self, store: RedisStore, retention_days: int) -> None:
        self.store = store
        self.ttl_s = retention_days * 86_400
        self._sum = store.redis.register_script(_SUM)
        self._sum_days = store.redis.register_script(_SUM_DAYS)

    def key(self, day: date) -> str:
        return self.store.key("insight", "d", day.strftime("%Y%m%d"))

    @property
    def dims_key(self) -> str:
        return self.store.key("insight", "dims")

    def add_into(self, pipe, at: datetime, dims: Dims, counts: dict[str, int]) -> None:
        at = at.astimezone(UTC)
        key = self.key(at.date())
        counts = {**counts, f"turns@{at.hour:02d}": counts.get("turns", 0)}
        for measure, n in counts.items():
            if n:
                pipe.hincrby(key, f"{measure}{dims.suffix}", n)
                pipe.hincrby(key, measure, n)  # the day's total, for a report without filters
        pipe.expire(key, self.ttl_s)
        pipe.sadd(self.dims_key, dims.suffix)

    @property
    def api_keys_key(self) -> str:
        return self.store.key("insight", "api_keys")

    def add_key_into(self, pipe, at: datetime, key_id: str, counts: dict[str, int]) -> None:
        """An agent API call's counts under its API key (``KEY_MEASURES``), in the day's hash."""
        day = self.key(at.astimezone(UTC).date())
        for measure, n in counts.items():
            if n:
                pipe.hincrby(day, f"key:{measure}{SEP}{_clean(key_id)}", n)
        pipe.sadd(self.api_keys_key, _clean(key_id))

    async def read_keys(self, first: date, last: date) -> dict[str, dict[str, int]]:
        """Each API key's sums over the range (turns, tokens, cost), whatever the other filters."""
        key_ids = sorted(raw.decode() for raw in await self.store.redis.smembers(self.api_keys_key))
        if not key_ids:
            return {}
        fields = [f"key:{m}{SEP}{k}" for k in key_ids for m in KEY_MEASURES]
        pipe = self.store.redis.pipeline(transaction=False)
        for day in days_between(first, last):
            pipe.hmget(self.key(day), fields)
        sums = [0] * len(fields)
        for values in await pipe.execute():
            sums = [s + int(v or 0) for s, v in zip(sums, values, strict=True)]
        per = len(KEY_MEASURES)
        return {k: dict(zip(KEY_MEASURES, sums[i * per:(i + 1) * per], strict=True)) for i, k in enumerate(key_ids)}

    async def read_by_dims(self, first: date, last: date, combos: list[str]) -> dict[str, dict[str, int]]:
        """Each (agent, channel, connection) of ``combos``' sums over the range (``BREAKDOWN`` measures), summed
        in Redis: one round trip."""
        combos = [c for c in combos if c]
        if not combos:
            return {}
        fields = [f"{m}{c}" for c in combos for m in BREAKDOWN]
        sums = await self._sum_days(keys=[self.key(day) for day in days_between(first, last)], args=fields)
        per = len(BREAKDOWN)
        return {c: dict(zip(BREAKDOWN, sums[i * per:(i + 1) * per], strict=True)) for i, c in enumerate(combos)}

    async def add(self, at: datetime, dims: Dims, counts: dict[str, int]) -> None:
        pipe = self.store.redis.pipeline(transaction=False)
        self.add_into(pipe, at, dims, counts)
        await pipe.execute()

    async def combos(self, wanted: tuple[str | None, str | None, str | None]) -> list[str]:
        """The (agent, channel, connection) suffixes seen that ``wanted`` matches (None: any)."""
        combos = [raw.decode() for raw in await self.store.redis.smembers(self.dims_key)]
        return sorted(c for c in combos if Dims.parse(c).matches(*wanted))

    async def read(self, first: date, last: date, wanted: tuple[str | None, str | None, str | None],
                   combos: list[str] | None = None) -> list[DayCounts]:
        """Each day's sums over the (agent, channel, connection) ``wanted`` matches (None: any), summed in Redis
        (one Lua call over the range's day hashes): one round trip and a few dozen numbers a day, whatever the
        number of (agent, channel, connection) behind them. ``combos``: the matching ones, when known."""
        if combos is None:
            combos = await self.combos(wanted)
        days = list(days_between(first, last))
        if not combos:
            return [DayCounts(day, dict.fromkeys(MEASURES, 0), [0] * 24) for day in days]
        if wanted == (None, None, None):
            combos = [""]  # the day's totals
        names = [*MEASURES, *(f"turns@{h:02d}" for h in range(24))]
        sums = await self._sum(keys=[self.key(day) for day in days], args=[len(combos), *names, *combos])
        out = []
        for day, numbers in zip(days, sums, strict=True):
            counts = dict(zip(MEASURES, numbers, strict=False))
            out.append(DayCounts(day, counts, list(numbers[len(MEASURES):])))
        return out


# KEYS: the days' hashes. ARGV: how many suffixes, the measures, the suffixes. Per day, each measure summed over
# the suffixes (fields read in slices, under Lua's limit on unpacked arguments).
_SUM = """
local n = tonumber(ARGV[1])
local names, suffixes = {}, {}
for i = 2, #ARGV - n do names[#names + 1] = ARGV[i] end
for i = #ARGV - n + 1, #ARGV do suffixes[#suffixes + 1] = ARGV[i] end
local fields = {}
for _, name in ipairs(names) do
  for _, suffix in ipairs(suffixes) do fields[#fields + 1] = name .. suffix end
end
local out = {}
for _, key in ipairs(KEYS) do
  local sums = {}
  for i = 1, #names do sums[i] = 0 end
  for start = 1, #fields, 4000 do
    local stop = math.min(start + 3999, #fields)
    local values = redis.call('HMGET', key, unpack(fields, start, stop))
    for j, v in ipairs(values) do
      if v then
        local index = math.floor((start + j - 2) / n) + 1
        sums[index] = sums[index] + tonumber(v)
      end
    end
  end
  out[#out + 1] = sums
end
return out
"""

# KEYS: the days' hashes. ARGV: fields. Each field summed over the days.
_SUM_DAYS = """
local sums = {}
for i = 1, #ARGV do sums[i] = 0 end
for _, key in ipairs(KEYS) do
  for start = 1, #ARGV, 4000 do
    local stop = math.min(start + 3999, #ARGV)
    local values = redis.call('HMGET', key, unpack(ARGV, start, stop))
    for j, v in ipairs(values) do
      if v then sums[start + j - 1] = sums[start + j - 1] + tonumber(v) end
    end
  end
end
return sums
"""

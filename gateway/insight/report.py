"""``GET /api/insights``: the figures for a range of days and filters, summed from the daily counters only."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

import numpy as np

from gateway.conversation.store import RedisStore
from gateway.core.errors import InvalidInput
from gateway.insight.counters import MEASURES, DailyCounters, Dims, days_between
from gateway.insight.feedback import Feedback
from gateway.insight.gap_clusters import GapGroup, merge_similar, unit
from gateway.insight.outcomes import GAP_EXAMPLES
from gateway.insight.prices import NANO
from rag_core.encoders import DenseEncoder

__all__ = ["MAX_DAYS", "InsightQuery", "Insights"]

log = logging.getLogger(__name__)

MAX_DAYS = 400
GAPS_LISTED = 20
GAPS_READ = 3 * GAPS_LISTED  # word groups read to be merged by meaning into the listed gaps


@dataclass(frozen=True)
class InsightQuery:
    """Whole UTC days, ``first`` to ``last`` included."""

    first: date
    last: date
    agent: str | None = None
    channel: str | None = None
    connection: str | None = None

    @classmethod
    def parse(cls, start: str = "", end: str = "", agent: str | None = None, channel: str | None = None,
              connection: str | None = None, today: date | None = None) -> InsightQuery:
        """``from``/``to`` as dates (an ISO time counts as its UTC day); default the last 7 days, today included."""
        today = today or datetime.now(UTC).date()
        last = _day(end, "to") if end else today
        first = _day(start, "from") if start else last - timedelta(days=6)
        if first > last:
            raise InvalidInput("from: must not be after to")
        if (last - first).days >= MAX_DAYS:
            raise InvalidInput(f"to: a range of at most {MAX_DAYS} days")
        return cls(first, last, agent or None, channel or None, connection)

    @property
    def dims(self) -> tuple[str | None, str | None, str | None]:
        return self.agent, self.channel, self.connection


def _day(text: str, name: str) -> date:
    try:
        if len(text) == 10:
            return date.fromisoformat(text)
        at = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidInput(f"{name}: {text!r} is not a date (YYYY-MM-DD) or an ISO time") from exc
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(UTC).date()


class Insights:
    def __init__(self, store: RedisStore, counters: DailyCounters, feedback: Feedback) -> None:
        self.store = store
        self.counters = counters
        self.feedback = feedback
        # the knowledge base's embedding model, asked for when gaps are read (it loads at start); None or an
        # answer of None: the word groups are the gaps
        self.encoder: Callable[[], DenseEncoder | None] | None = None

    def dismissed_key(self) -> str:
        return self.store.key("insight", "gaps", "dismissed")

    async def dismiss_gap(self, gap_id: str) -> None:
        await self.store.redis.sadd(self.dismissed_key(), gap_id)

    async def report(self, query: InsightQuery) -> dict:
        totals: dict[str, int] = dict.fromkeys(MEASURES, 0)
        hours_of_day = [0] * 24
        start = datetime.combine(query.first, time.min, tzinfo=UTC)
        end = datetime.combine(query.last, time.max, tzinfo=UTC)
        combos = await self.counters.combos(query.dims)
        # The counters, the comments and the gaps at once: the report waits for the slowest, not their sum.
        days, comments, gaps, keys, by_dims = await asyncio.gather(
            self.counters.read(query.first, query.last, query.dims, combos),
            self.feedback.recent_comments(start, end, query.dims), self._gaps(query, combos),
            self.counters.read_keys(query.first, query.last),
            self.counters.read_by_dims(query.first, query.last, combos))
        for day in days:
            for measure, n in day.counts.items():
                totals[measure] += n
            hours_of_day = [a + b for a, b in zip(hours_of_day, day.turns_by_hour, strict=True)]
        return {
            "from": query.first.isoformat(), "to": query.last.isoformat(),
            "filters": {"agent": query.agent, "channel": query.channel, "connection": query.connection},
            **_figures(totals),
            "busiest_hours": hours_of_day,
            "by_day": [{"day": day.day.isoformat(), **_figures(day.counts)} for day in days],
            "recent_comments": comments,
            "gaps": gaps,
            **_breakdown(by_dims),
            # the agent API's calls by API key over the range (the agent/channel/connection filters do not apply)
            "by_api_key": [{"api_key": key_id, "turns": n["turns"],
                            "tokens": {"prompt": n["prompt"], "completion": n["completion"]},
                            "cost": round(n["cost_nano"] / NANO, 9)} for key_id, n in keys.items() if n["turns"]],
        }

    async def _gaps(self, query: InsightQuery, combos: list[str]) -> list[dict]:
        """The unanswered questions of the range, most asked first: the days' and (agent, channel, connection)s'
        word groups are summed in Redis (ZUNIONSTORE into a key of the moment; without filters, the days'
        totals), and the most asked of them merged by meaning (``gap_clusters``). A gap with a dismissed
        group in it stays dismissed."""
        if combos and query.dims == (None, None, None):
            combos = [""]
        keys = [self.store.key("insight", "gaps", day.strftime("%Y%m%d")) + combo
                for day in days_between(query.first, query.last) for combo in combos]
        if not keys:
            return []
        dismissed = await self.store.redis.smembers(self.dismissed_key())
        scratch = self.store.key("insight", "gaps", "sum", uuid.uuid4().hex)
        pipe = self.store.redis.pipeline(transaction=True)
        pipe.zunionstore(scratch, keys)
        pipe.zrevrange(scratch, 0, GAPS_READ - 1, withscores=True)
        pipe.delete(scratch)
        top = [(raw.decode(), int(score)) for raw, score in (await pipe.execute())[-2]]
        pipe = self.store.redis.pipeline(transaction=False)
        for gap_id, _ in top:
            pipe.lrange(self.store.key("insight", "gap", gap_id, "examples"), 0, -1)
            pipe.smembers(self.store.key("insight", "gap", gap_id, "offered"))
            pipe.get(self._vector_key(gap_id))
        found = await pipe.execute() if top else []
        groups = [GapGroup(gap_id, count, [e.decode() for e in found[3 * i]], {t.decode() for t in found[3 * i + 1]})
                  for i, (gap_id, count) in enumerate(top)]
        vectors = {g.id: np.frombuffer(raw, dtype=np.float32) for g, raw in zip(groups, found[2::3], strict=True)
                   if raw}
        vectors.update(await self._embedded([g for g in groups if g.id not in vectors and g.examples]))
        merged = merge_similar(groups, vectors, examples=GAP_EXAMPLES)
        return [g.answer() for g in merged if not dismissed.intersection(m.encode() for m in g.members)][:GAPS_LISTED]

    def _vector_key(self, gap_id: str) -> str:
        return self.store.key("insight", "gap", gap_id, "vector")

    async def _embedded(self, groups: list[GapGroup]) -> dict[str, np.ndarray]:
        """Each group's first example embedded (once: kept beside the group as long as its counts)."""
        encoder = self.encoder() if self.encoder is not None else None
        if encoder is None or not groups:
            return {}
        try:
            raw = await encoder.embed_queries([g.examples[-1] for g in groups])  # the oldest example
        except Exception as exc:  # the model is away: the word groups stand alone this time
            log.warning("insight: could not embed %d gap groups: %s", len(groups), exc)
            return {}
        vectors = {g.id: unit(v) for g, v in zip(groups, raw, strict=True)}
        pipe = self.store.redis.pipeline(transaction=False)
        for gap_id, vector in vectors.items():
            pipe.set(self._vector_key(gap_id), vector.astype(np.float32).tobytes(), ex=self.counters.ttl_s)
        await pipe.execute()
        return vectors


def _figures(counts: dict[str, int]) -> dict:
    rated = counts["up"] + counts["down"]
    return {
        "conversations": counts["conversations"], "turns": counts["turns"], "resolved": counts["resolved"],
        "handed_off": counts["handed_off"], "unanswered": counts["unanswered"], "abandoned": counts["abandoned"],
        "feedback": {"up": counts["up"], "down": counts["down"], "comments": counts["comments"]},
        "rated_up_share": round(counts["up"] / rated, 4) if rated else None,
        "csat": {"count": counts["csat"],
                 "average": round(counts["csat_sum"] / counts["csat"], 2) if counts["csat"] else None},
        "tokens": {"prompt": counts["prompt"], "completion": counts["completion"], "unpriced": counts["unpriced"]},
        "cost": round(counts["cost_nano"] / NANO, 9),
    }


def _breakdown(by_dims: dict[str, dict[str, int]]) -> dict:
    """The range's totals per agent, per channel and per connection (within the filters)."""
    out: dict[str, dict[str, Counter]] = {"by_agent": {}, "by_channel": {}, "by_connection": {}}
    for suffix, counts in by_dims.items():
        dims = Dims.parse(suffix)
        for name, value in (("by_agent", dims.agent), ("by_channel", dims.channel), ("by_connection", dims.connection)):
            out[name].setdefault(value, Counter()).update(counts)
    return {name: [{"name": value, "conversations": n["conversations"], "turns": n["turns"],
                    "tokens": {"prompt": n["prompt"], "completion": n["completion"]},
                    "cost": round(n["cost_nano"] / NANO, 9)}
                   for value, n in sorted(groups.items(), key=lambda item: -item[1]["cost_nano"])]
            for name, groups in out.items()}

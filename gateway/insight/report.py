"""``GET /api/insights``: the figures for a range and filters, summed from the hourly counters only."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from gateway.conversation.store import RedisStore
from gateway.core.errors import InvalidInput
from gateway.insight.counters import MEASURES, SEP, Dims, HourlyCounters, hours_between
from gateway.insight.feedback import Feedback
from gateway.insight.prices import NANO

__all__ = ["MAX_DAYS", "InsightQuery", "Insights"]

MAX_DAYS = 400
GAPS_LISTED = 20


@dataclass(frozen=True)
class InsightQuery:
    start: datetime
    end: datetime
    agent: str | None = None
    channel: str | None = None
    connection: str | None = None

    @classmethod
    def parse(cls, start: str = "", end: str = "", agent: str | None = None, channel: str | None = None,
              connection: str | None = None, now: datetime | None = None) -> InsightQuery:
        """``from``/``to`` as dates (whole UTC days) or ISO times; default the last 7 days."""
        now = now or datetime.now(UTC)
        until = _when(end, "to", end_of_day=True) if end else now
        since = _when(start, "from", end_of_day=False) if start else (until - timedelta(days=7))
        if since > until:
            raise InvalidInput("from: must not be after to")
        if until - since > timedelta(days=MAX_DAYS):
            raise InvalidInput(f"to: a range of at most {MAX_DAYS} days")
        return cls(since, until, agent, channel, connection)

    @property
    def dims(self) -> tuple[str | None, str | None, str | None]:
        return self.agent, self.channel, self.connection


def _when(text: str, name: str, *, end_of_day: bool) -> datetime:
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return datetime.combine(day, time.max if end_of_day else time.min, tzinfo=UTC)
        at = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidInput(f"{name}: {text!r} is not a date (YYYY-MM-DD) or an ISO time") from exc
    return at if at.tzinfo else at.replace(tzinfo=UTC)


class Insights:
    def __init__(self, store: RedisStore, counters: HourlyCounters, feedback: Feedback) -> None:
        self.store = store
        self.counters = counters
        self.feedback = feedback

    def dismissed_key(self) -> str:
        return self.store.key("insight", "gaps", "dismissed")

    async def dismiss_gap(self, gap_id: str) -> None:
        await self.store.redis.sadd(self.dismissed_key(), gap_id)

    async def report(self, query: InsightQuery) -> dict:
        totals: dict[str, int] = dict.fromkeys(MEASURES, 0)
        days: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(MEASURES, 0))
        hours_of_day = [0] * 24
        for at, fields in await self.counters.read(hours_between(query.start, query.end)):
            day = days[at.date().isoformat()]
            for name, n in fields.items():
                measure, _, suffix = name.partition(SEP)
                if measure not in totals or not Dims.parse(SEP + suffix).matches(*query.dims):
                    continue
                totals[measure] += n
                day[measure] += n
                if measure == "turns":
                    hours_of_day[at.hour] += n
        return {
            "from": query.start.isoformat(), "to": query.end.isoformat(),
            "filters": {"agent": query.agent, "channel": query.channel, "connection": query.connection},
            **_figures(totals),
            "busiest_hours": hours_of_day,
            "by_day": [{"day": day, **_figures(counts)} for day, counts in sorted(days.items())],
            "recent_comments": await self.feedback.recent_comments(query.start, query.end, query.dims),
            "gaps": await self._gaps(query),
        }

    async def _gaps(self, query: InsightQuery) -> list[dict]:
        """The unanswered questions of the range, grouped by their content words, most asked first."""
        day_keys = []
        day = query.start.date()
        while day <= query.end.date():
            day_keys.append(day.strftime("%Y%m%d"))
            day += timedelta(days=1)
        pipe = self.store.redis.pipeline(transaction=False)
        for key in day_keys:
            pipe.zrange(self._gaps_key(key), 0, -1, withscores=True)
        pipe.smembers(self.dismissed_key())
        *answers, dismissed = await pipe.execute()
        dismissed = {d.decode() for d in dismissed}
        counts: dict[str, int] = defaultdict(int)
        for rows in answers:
            for member, score in rows:
                gap_id, _, suffix = member.decode().partition(SEP)
                if gap_id not in dismissed and Dims.parse(SEP + suffix).matches(*query.dims):
                    counts[gap_id] += int(score)
        top = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:GAPS_LISTED]
        pipe = self.store.redis.pipeline(transaction=False)
        for gap_id, _ in top:
            pipe.lrange(self.store.key("insight", "gap", gap_id, "examples"), 0, -1)
            pipe.smembers(self.store.key("insight", "gap", gap_id, "offered"))
        found = await pipe.execute() if top else []
        return [{
            "id": gap_id, "count": count,
            "examples": list(dict.fromkeys(e.decode() for e in found[2 * i])),
            "offered_topics": sorted(t.decode() for t in found[2 * i + 1]),
        } for i, (gap_id, count) in enumerate(top)]

    def _gaps_key(self, day: str) -> str:
        return self.store.key("insight", "gaps", day)


def _figures(counts: dict[str, int]) -> dict:
    rated = counts["up"] + counts["down"]
    return {
        "conversations": counts["conversations"], "turns": counts["turns"], "resolved": counts["resolved"],
        "handed_off": counts["handed_off"], "unanswered": counts["unanswered"], "abandoned": counts["abandoned"],
        "feedback": {"up": counts["up"], "down": counts["down"], "comments": counts["comments"]},
        "rated_up_share": round(counts["up"] / rated, 4) if rated else None,
        # The closing CSAT question (SMS/WhatsApp, 1-5) is not built yet: nothing is counted here so far.
        "csat": {"count": 0, "average": None},
        "tokens": {"prompt": counts["prompt"], "completion": counts["completion"], "unpriced": counts["unpriced"]},
        "cost": round(counts["cost_nano"] / NANO, 9),
    }

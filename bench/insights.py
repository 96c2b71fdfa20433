"""Insights benchmark: ``GET /api/insights`` with 100,000 conversations' worth of counters.

The counters are summed here and written under the insight code's own keys and field names
(``DailyCounters.key``, ``Dims.suffix``, the gap groups' keys), spread over 30 days, 3 agents,
5 channels and 2 connections: per conversation its start, 3 turns, tokens and cost, an outcome;
1 in 4 rated (1 in 3 of those with a comment, into the recent comments); 1 in 8 unanswered, into
one of 3,000 gap groups. The gateway then answers in process (uvicorn in a thread) on a Redis of its
own, with the knowledge base's embedding model (fastembed, ``../shared/models/all-MiniLM-L6-v2`` when
present): each query's first read ("cold") embeds the gap groups it lists that have no vector yet (up to
60, then kept beside the group), then it is asked 5 times to warm up and ``--repeat`` times ("warm").
Target (issue 41): < 300 ms.

    python bench/insights.py [--conversations N] [--repeat N]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import httpx
import redis as redis_sync
from redis.asyncio import Redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import free_port, wait_port  # noqa: E402
from gateway.conversation.store import RedisStore  # noqa: E402
from gateway.core.metrics import Metrics  # noqa: E402
from gateway.core.settings import Settings  # noqa: E402
from gateway.http.app import create_app  # noqa: E402
from gateway.insight.counters import Dims  # noqa: E402
from gateway.insight.feedback import Vote  # noqa: E402
from gateway.insight.report import InsightQuery  # noqa: E402
from gateway.insight.service import Insight  # noqa: E402
from tests.fakes.live_server import LiveServer  # noqa: E402

AGENT_ID = "benchinsight"
MODEL = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2"
AGENTS = ("", "sales@3", "support@1")
CHANNELS = ("webchat", "telegram", "slack", "twilio_sms", "api")
CONNECTIONS = ("", "conn-b")
OUTCOMES = ("resolved", "resolved", "resolved", "handed_off", "unanswered", "abandoned")


SUBJECTS = ("parking", "gift vouchers", "tandem bikes", "child seats", "rain covers", "group tours", "night rides",
            "insurance", "deposits", "cargo bikes", "dog trailers", "lost keys", "student discounts", "invoices",
            "helmet sizes", "GPS trackers", "route maps", "bike locks", "battery range", "repair times")
PLACES = ("at the station", "in the old town", "near the beach", "on weekends", "for tourists", "in winter",
          "for companies", "by the river", "after 8 pm", "for families", "on holidays", "in the park")
ASKED = ("Do you have {}?", "What about {}?", "Can I get {}?", "Is there anything for {}?", "How do {} work?")


def question(gap: int, rng: random.Random) -> str:
    """An unanswered question of gap group ``gap``: its subject and place, asked one of a few ways (groups
    share subjects, so some merge by meaning and most stay apart)."""
    subject = f"{SUBJECTS[gap % len(SUBJECTS)]} {PLACES[(gap // len(SUBJECTS)) % len(PLACES)]}"
    return rng.choice(ASKED).format(subject)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def seed(settings: Settings, conversations: int, rng: random.Random) -> None:
    redis = Redis.from_url(settings.redis_url)
    store = RedisStore(redis, settings.agent_id)
    insight = Insight.build(settings, store, Metrics())
    now = datetime.now(UTC)
    pipe = redis.pipeline(transaction=False)
    days: dict[date, Counter] = defaultdict(Counter)
    for i in range(conversations):
        at = now - timedelta(seconds=rng.uniform(0, 30 * 86_400))
        dims = Dims.of(rng.choice(AGENTS), rng.choice(CHANNELS), rng.choice(CONNECTIONS))
        prompt, completion = rng.randint(300, 3000), rng.randint(20, 400)
        counts = {"conversations": 1, "turns": 3, "prompt": prompt, "completion": completion,
                  "cost_nano": insight.prices.cost_nano("gpt-4o-mini", prompt, completion) or 0,
                  rng.choice(OUTCOMES): 1}
        if i % 4 == 0:
            rating = rng.choice(("up", "up", "down"))
            comment = f"comment {i}" if i % 12 == 0 else None
            counts |= {rating: 1, "comments": int(comment is not None)}
            if comment:
                vote = Vote(conversation_id=f"c{i}", message_id=f"m{i}", voter=f"web:{i}", rating=rating,
                            comment=comment, at=at, dims=dims.suffix)
                pipe.lpush(insight.feedback.comments_key, vote.model_dump_json())
        day = days[at.date()]
        for measure, n in {**counts, f"turns@{at.hour:02d}": counts["turns"]}.items():
            day[f"{measure}{dims.suffix}"] += n
            day[measure] += n
        pipe.sadd(insight.counters.dims_key, dims.suffix)
        if i % 8 == 0:
            gap = f"{rng.randrange(3000):012x}"
            pipe.zincrby(insight.outcomes.gaps_key(at.date(), dims.suffix), 1, gap)
            pipe.zincrby(insight.outcomes.gaps_key(at.date(), ""), 1, gap)
            pipe.lpush(insight.outcomes.gap_key(gap, "examples"), question(int(gap, 16), rng))
            pipe.ltrim(insight.outcomes.gap_key(gap, "examples"), 0, 4)
            pipe.sadd(insight.outcomes.gap_key(gap, "offered"), f"topic-{rng.randrange(50)}")
        if len(pipe.command_stack) > 20_000:
            await pipe.execute()
    pipe.ltrim(insight.feedback.comments_key, 0, 499)
    for day, fields in days.items():
        pipe.hset(insight.counters.key(day), mapping=dict(fields))
    await pipe.execute()
    info = await redis.info("memory")
    print(f"seeded {conversations:,} conversations' counters: Redis uses {info['used_memory'] / 2**20:.1f} MiB")
    await redis.aclose()


async def direct(settings: Settings, queries: dict[str, dict], repeat: int) -> None:
    """The same reports without HTTP (the work itself, apart from the server thread's scheduling on a busy
    machine)."""
    redis = Redis.from_url(settings.redis_url)
    insight = Insight.build(settings, RedisStore(redis, settings.agent_id), Metrics())
    for name, params in queries.items():
        query = InsightQuery.parse(params.get("from", ""), "", params.get("agent"), params.get("channel"),
                                   params.get("connection"))
        samples = []
        for i in range(repeat + 5):
            t0 = time.perf_counter()
            await insight.insights.report(query)
            if i >= 5:
                samples.append((time.perf_counter() - t0) * 1000)
        print(f"{name:28s} p50 {statistics.median(samples):6.1f} ms  p95 {pct(samples, 0.95):6.1f} ms  (in process)")
    await redis.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="sb-bench-insights-")
    port = free_port()
    redis_server = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                                     "--dir", data_dir], stdout=subprocess.DEVNULL)
    try:
        wait_port(port)
        settings = Settings(_env_file=None, agent_id=AGENT_ID, redis_url=f"redis://127.0.0.1:{port}/0",
                            data_dir=Path(data_dir) / "data", qdrant_url=":memory:",
                            embeddings="fastembed" if MODEL.exists() else "none",
                            embedding_model_path=MODEL if MODEL.exists() else None,
                            admin_token="bench-admin", log_level="WARNING")
        print(f"embedding model: {settings.embedding_model_path or 'none (gap groups are not merged by meaning)'}")
        started = time.perf_counter()
        asyncio.run(seed(settings, args.conversations, random.Random(7)))
        print(f"seeding took {time.perf_counter() - started:.1f} s")
        queries = {
            "7 days": {},
            "30 days": {"from": (datetime.now(UTC) - timedelta(days=30)).date().isoformat()},
            "30 days, one channel": {"from": (datetime.now(UTC) - timedelta(days=30)).date().isoformat(),
                                     "channel": "telegram"},
            "30 days, agent + connection": {"from": (datetime.now(UTC) - timedelta(days=30)).date().isoformat(),
                                            "agent": "sales@3", "connection": "conn-b"},
        }
        with LiveServer(create_app(settings)) as server, httpx.Client(base_url=server.url, timeout=30) as client:
            headers = {"Authorization": "Bearer bench-admin"}
            # The gateway's own start-up work (search backfill, workers, the embedding model) runs for a few
            # seconds: let it settle on a range without gaps, so it is not measured as the first query's time.
            settle = time.monotonic() + 5
            empty = {"from": "2020-01-01", "to": "2020-01-02"}
            while time.monotonic() < settle:
                client.get("/api/insights", params=empty, headers=headers)
            vectors = redis_sync.from_url(settings.redis_url)
            for name, params in queries.items():
                before = sum(1 for _ in vectors.scan_iter(match="*insight:gap:*:vector", count=1000))
                t0 = time.perf_counter()
                cold = client.get("/api/insights", params=params, headers=headers)
                cold_ms = (time.perf_counter() - t0) * 1000
                embedded = sum(1 for _ in vectors.scan_iter(match="*insight:gap:*:vector", count=1000)) - before
                print(f"{name:28s} cold {cold_ms:6.1f} ms (HTTP {cold.status_code}; embedded {embedded} gap groups)")
                for _ in range(5):
                    client.get("/api/insights", params=params, headers=headers)
                samples = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    answer = client.get("/api/insights", params=params, headers=headers)
                    samples.append((time.perf_counter() - t0) * 1000)
                    if answer.status_code != 200:
                        raise SystemExit(f"{name}: HTTP {answer.status_code}: {answer.text[:200]}")
                body = answer.json()
                print(f"{name:28s} warm p50 {statistics.median(samples):6.1f} ms  p95 {pct(samples, 0.95):6.1f} ms  "
                      f"max {max(samples):6.1f} ms  ({body['conversations']:,} conversations, "
                      f"{len(body['by_day'])} days, {len(body['gaps'])} gaps, cost {body['cost']:.2f})")
        asyncio.run(direct(settings, queries, args.repeat))
    finally:
        redis_server.terminate()
        redis_server.wait(10)
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

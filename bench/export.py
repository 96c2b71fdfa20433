"""Conversation export benchmark: ``GET /api/conversations/export`` of N stored conversations (default
100,000), JSON lines and CSV, with the gateway's resident memory sampled while it streams.

The gateway runs as a uvicorn subprocess on a Redis of the bench's own (``redis-server`` on a free
port); the conversations are ``bench/admin.py``'s (a user message, an agent reply and its trace each, one
in three with an outcome), written with ``RedisStore``'s own ``*_into`` writes (the keys a turn writes,
the search index among them) in pipelines of 250 conversations, so 100,000 are stored in minutes. RSS is
read from ``/proc/<pid>/status`` every 50 ms. Target (issue 41): the gateway's RSS grows < 100 MB while it
streams.

    python bench/export.py [--conversations N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from redis.asyncio import Redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.admin import bench_conversation, wait_ready  # noqa: E402
from bench.harness import free_port, wait_port  # noqa: E402
from gateway.conversation.outcome_index import OUTCOMES, OutcomeIndex  # noqa: E402
from gateway.conversation.search import INDEX_VERSION  # noqa: E402
from gateway.conversation.store import RedisStore  # noqa: E402
from gateway.insight.counters import Dims  # noqa: E402

PIPELINE = 250  # conversations a round trip

AGENT = "benchexport"
FROM = (datetime.now(UTC) - timedelta(days=30)).date().isoformat()  # the seeded conversations are from now


async def seed(store: RedisStore, count: int, rng: random.Random) -> None:
    """``count`` conversations, pipelined; the search index is marked built, as the gateway's backfill
    would mark it (every message was indexed as it was stored)."""
    index, outcomes = OutcomeIndex(store), list(OUTCOMES)
    pipe = store.redis.pipeline(transaction=False)
    for i in range(count):
        made = bench_conversation(i, rng)
        pipe.set(store.key("persona", made.persona.id), made.persona.model_dump_json())
        store.save_conversation_into(pipe, made.conversation)
        store.add_message_into(pipe, made.user)
        store.add_message_into(pipe, made.agent)
        store.save_trace_into(pipe, made.trace)
        if i % 3 == 0:  # an outcome, as insight flags it (the export's outcome column)
            outcome = outcomes[i % len(outcomes)]
            flags = store.key("insight", "conv", made.conversation.id)
            pipe.hset(flags, mapping={"dims": Dims.of(None, made.conversation.channel, None).suffix, outcome: 1})
            index.add_into(pipe, outcome, made.conversation.id, made.agent.created_at.timestamp(), 14 * 86_400)
        if (i + 1) % PIPELINE == 0:
            await pipe.execute()
    pipe.set(store.key("search", "built"), INDEX_VERSION)
    await pipe.execute()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def settle(pid: int, quiet_s: float = 10.0, limit_s: float = 600.0) -> float:
    """Wait until the gateway's RSS stays within 2 MiB for ``quiet_s`` (its start-up work is done)."""
    deadline = time.monotonic() + limit_s
    low = high = rss_mb(pid)
    since = time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < quiet_s:
        time.sleep(0.5)
        now = rss_mb(pid)
        low, high = min(low, now), max(high, now)
        if high - low > 2:
            low = high = now
            since = time.monotonic()
    return rss_mb(pid)


def export(base: str, pid: int, fmt: str) -> tuple[float, int, int, float, float]:
    """Seconds, bytes, lines, RSS before and the highest RSS while it streamed."""
    before = rss_mb(pid)
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_mb(pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    size = lines = 0
    with httpx.stream("GET", f"{base}/api/conversations/export", params={"format": fmt, "from": FROM},
                      headers={"Authorization": "Bearer bench-admin"}, timeout=3600) as answer:
        if answer.status_code != 200:
            raise SystemExit(f"export: HTTP {answer.status_code}")
        for chunk in answer.iter_bytes():
            size += len(chunk)
            lines += chunk.count(b"\n")
    done.set()
    sampler.join()
    return time.perf_counter() - started, size, lines, before, peak[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=100_000)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="sb-bench-export-")
    redis_port, port = free_port(), free_port()
    redis_server = subprocess.Popen(["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no",
                                     "--dir", data_dir], stdout=subprocess.DEVNULL)
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    env = {**os.environ, "SWITCHBOARD_AGENT_ID": AGENT, "SWITCHBOARD_REDIS_URL": redis_url,
           "SWITCHBOARD_DATA_DIR": str(Path(data_dir) / "data"), "SWITCHBOARD_ADMIN_TOKEN": "bench-admin",
           "SWITCHBOARD_LOG_LEVEL": "WARNING", "SWITCHBOARD_EMBEDDINGS": "none", "SWITCHBOARD_QDRANT_URL": ":memory:"}
    gateway = None
    try:
        wait_port(redis_port)
        started = time.perf_counter()

        async def stored() -> None:
            redis = Redis.from_url(redis_url)
            await seed(RedisStore(redis, AGENT), args.conversations, random.Random(7))
            await redis.aclose()

        asyncio.run(stored())
        print(f"stored {args.conversations:,} conversations in {time.perf_counter() - started:.1f} s")
        base = f"http://127.0.0.1:{port}"
        gateway = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "gateway.http.app:create_app", "--factory", "--host", "127.0.0.1",
             "--port", str(port), "--log-level", "warning", "--no-access-log"], cwd=ROOT, env=env)
        wait_ready(base)
        settled = settle(gateway.pid)
        print(f"gateway settled at {settled:.0f} MiB RSS (its start-up work, e.g. the conversation search backfill "
              f"of the stored conversations, done before measuring)")
        for fmt in ("jsonl", "csv"):
            seconds, size, lines, before, peak = export(base, gateway.pid, fmt)
            print(f"{fmt:5s}: {lines:,} lines, {size / 2**20:.1f} MiB in {seconds:.1f} s "
                  f"({args.conversations / seconds:,.0f} conversations/s); gateway RSS {before:.0f} MiB before, "
                  f"{peak:.0f} MiB at most while streaming (+{peak - before:.0f} MiB)")
    finally:
        if gateway is not None:
            gateway.terminate()
            gateway.wait(15)
        redis_server.terminate()
        redis_server.wait(10)
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

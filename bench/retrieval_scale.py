"""Retrieval on a 20,000-topic synthetic knowledge base through ``POST /api/kb/search`` of a real gateway
(shipped defaults: embeddings on, local-mode Qdrant on disk): import time, search p50/p95 with the cache off
and on a cache hit, and the gateway's memory.

    python bench/retrieval_scale.py [--topics 20000] [--queries 500]

The topics are the 776 OR-ShARC and StackFAQ topics, each repeated with its sentences reordered and a
sentence of another topic added, so the collection has realistic text and vocabulary (and many
near-duplicates, which is harder for ranking, not easier for speed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import free_port, wait_http  # noqa: E402

DATASETS = ROOT.parent / "shared" / "datasets"
MODEL = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2"
ADMIN = {"Authorization": "Bearer bench-admin"}
BATCH = 2000


def synthetic(count: int) -> list[dict]:
    rng = random.Random(7)
    base = [json.loads(line) for name in ("orsharc", "stackfaq")
            for line in (DATASETS / name / "topics.jsonl").read_text().splitlines() if line]
    sentences = [s for t in base for s in (t.get("body") or t.get("summary") or "").split(". ") if s]
    out = []
    for i in range(count):
        topic = base[i % len(base)]
        parts = (topic.get("body") or topic.get("summary") or topic["title"]).split(". ")
        rng.shuffle(parts)
        out.append({"source": f"syn:{i}", "title": f"{topic['title']} #{i // len(base)}",
                    "facts": topic.get("facts", [])[:5], "body": ". ".join([*parts, rng.choice(sentences)])})
    return out


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=500)
    args = parser.parse_args()
    port = free_port()
    env = {"SWITCHBOARD_REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"),
           "SWITCHBOARD_AGENT_ID": "benchscale" + uuid.uuid4().hex[:6], "SWITCHBOARD_ADMIN_TOKEN": "bench-admin",
           "SWITCHBOARD_LOG_LEVEL": "WARNING", "SWITCHBOARD_DATA_DIR": tempfile.mkdtemp(prefix="sb-bench-scale-"),
           "SWITCHBOARD_EMBEDDING_MODEL_PATH": str(MODEL)}
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--port", str(port)], cwd=ROOT,
                            env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/readyz", timeout_s=180)
        idle = rss_mb(proc.pid)
        topics = synthetic(args.topics)
        queries = [json.loads(line)["query"] for line in
                   (DATASETS / "orsharc" / "queries.dev.jsonl").read_text().splitlines() if line][: args.queries]
        with httpx.Client(base_url=base, headers=ADMIN, timeout=900) as api:
            t0 = time.perf_counter()
            for start in range(0, len(topics), BATCH):
                body = "\n".join(json.dumps(t) for t in topics[start:start + BATCH])
                api.post("/api/kb/import?format=jsonl", content=body.encode()).raise_for_status()
            imported = time.perf_counter() - t0
            loaded = rss_mb(proc.pid)
            rows = {}
            for label, body in (("hybrid, cache off", {"semantic_cache": False}), ("hybrid, 1st (miss)", {}),
                                ("hybrid, cache hit", {}), ("bm25, cache off", {"strategy": "bm25",
                                                                                 "semantic_cache": False})):
                server = []
                for query in queries:
                    answer = api.post("/api/kb/search", json={"query": query, "strategy": "hybrid", **body})
                    answer.raise_for_status()
                    server.append(answer.json()["timings_ms"]["total"])
                rows[label] = server
            count = api.get("/api/kb/topics", params={"limit": 1}).json()["total"]
        print(f"{count} topics imported in {imported:.0f} s ({count / imported:.0f} topics/s, embedding included)")
        print(f"gateway memory: {idle:.0f} MB idle with the model loaded, {loaded:.0f} MB with {count} topics, "
              f"{rss_mb(proc.pid):.0f} MB after {len(queries) * len(rows)} searches")
        for label, server in rows.items():
            print(f"{label:<20} p50 {statistics.median(server):6.1f} ms   p95 {pct(server, 0.95):6.1f} ms  "
                  f"({len(server)} searches, server timings_ms.total)")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())

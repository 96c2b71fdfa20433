"""Every retrieval control on both dev splits, through ``POST /api/kb/search`` of a real gateway
(``python -m gateway serve``, embeddings on, MiniLM), with and without it, in one table; then the semantic
cache (hit cost, and what a cache shared by different users' paraphrases does to hit@1).

    python bench/retrieval_controls.py [--limit N] [--datasets DIR]

Each row runs every dev query once, one at a time, with ``k=10`` and the semantic cache off (except the
cache rows); the gateway runs with ``SWITCHBOARD_QUERY_EMBEDDING_CACHE=8`` so every search embeds its query
(by default a repeated query is embedded once per process). ``p50/p95`` are the server's own
``timings_ms.total`` (embedding included); ``http p50`` is the round trip. Rows that need a language model
(query_reformulation, LLM multi-query) or a trained cross-encoder (reranker) are not measured here: neither
exists offline on this machine. The cache-hit cost with the query's embedding remembered is measured by
``bench/retrieval_scale.py`` (shipped defaults).
"""

from __future__ import annotations

import argparse
import os
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

MODEL = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2"
ADMIN = {"Authorization": "Bearer bench-admin"}
ROWS: list[tuple[str, dict]] = [
    ("hybrid (default)", {"strategy": "hybrid"}),
    ("bm25", {"strategy": "bm25"}),
    ("dense", {"strategy": "dense"}),
    ("+ relevance_threshold 0.3", {"strategy": "hybrid", "relevance_threshold": 0.3}),
    ("+ mmr (lambda 0.7)", {"strategy": "hybrid", "selection_strategy": "mmr"}),
    ("+ max_results 3", {"strategy": "hybrid", "max_results": 3}),
    ("+ max_context_tokens 200", {"strategy": "hybrid", "max_context_tokens": 200}),
    ("+ recency_boost 0.05", {"strategy": "hybrid", "recency_boost": 0.05}),
    ("+ multi_query (rules)", {"strategy": "hybrid", "multi_query": True}),
    ("+ adaptive_routing", {"strategy": "hybrid", "adaptive_routing": True}),
    ("+ crag 0.3", {"strategy": "hybrid", "crag_confidence_threshold": 0.3}),
    ("+ adjacent_chunk_range 1", {"strategy": "hybrid", "adjacent_chunk_range": 1}),
]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def measure(api: httpx.Client, queries: list[dict], body: dict) -> dict:
    hit1 = hit3 = mrr = 0.0
    server, http, caches = [], [], []
    for case in queries:
        t0 = time.perf_counter()
        answer = api.post("/api/kb/search", json={"query": case["query"], "history": case.get("history", []),
                                                  "k": 10, **body})
        http.append((time.perf_counter() - t0) * 1000)
        answer.raise_for_status()
        data = answer.json()
        server.append(data["timings_ms"]["total"])
        caches.append(data["cache"])
        ranks = [i for i, r in enumerate(data["results"], start=1) if r["source"] in case["gold"]]
        if ranks:
            hit1 += ranks[0] == 1
            hit3 += ranks[0] <= 3
            mrr += 1 / ranks[0]
    n = max(len(queries), 1)
    return {"hit1": hit1 / n, "hit3": hit3 / n, "mrr": mrr / n, "p50": statistics.median(server),
            "p95": pct(server, 0.95), "http50": statistics.median(http), "hits": caches.count("hit") / n}


def row(dataset: str, label: str, m: dict, base: dict | None) -> str:
    delta = f"{(m['hit1'] - base['hit1']) * 100:+5.1f}" if base else "     "
    return (f"{dataset:<9} {label:<27} {m['hit1']:6.3f} {delta} {m['hit3']:6.3f} {m['mrr']:7.3f} "
            f"{m['p50']:7.1f} {m['p95']:7.1f} {m['http50']:8.1f}")


def gateway(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--port", str(port)], cwd=ROOT,
                            env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/readyz", timeout_s=180)
    return proc, base


def run(args: argparse.Namespace) -> None:
    import json

    print(f"{'dataset':<9} {'configuration':<27} {'hit@1':>6} {'d@1':>5} {'hit@3':>6} {'MRR@10':>7} "
          f"{'p50 ms':>7} {'p95 ms':>7} {'http p50':>8}")
    for name in ("orsharc", "stackfaq"):
        folder = args.datasets / name
        queries = [json.loads(line) for line in (folder / "queries.dev.jsonl").read_text().splitlines() if line]
        queries = queries[: args.limit] if args.limit else queries
        env = {"SWITCHBOARD_REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"),
               "SWITCHBOARD_AGENT_ID": "benchctl" + uuid.uuid4().hex[:6], "SWITCHBOARD_ADMIN_TOKEN": "bench-admin",
               "SWITCHBOARD_LOG_LEVEL": "WARNING", "SWITCHBOARD_DATA_DIR": tempfile.mkdtemp(prefix="sb-bench-ctl-"),
               "SWITCHBOARD_EMBEDDING_MODEL_PATH": str(MODEL), "SWITCHBOARD_RAG_TOP_K": "10",
               # each search embeds its query (a cache of 8 vectors serves only the search's own second
               # look-up: the semantic cache's key, MMR), so every row pays for its embedding
               "SWITCHBOARD_QUERY_EMBEDDING_CACHE": "8"}
        proc, base = gateway(env)
        try:
            with httpx.Client(base_url=base, headers=ADMIN, timeout=300) as api:
                topics = (folder / "topics.jsonl").read_bytes()
                api.post("/api/kb/import?format=jsonl", content=topics).raise_for_status()
                measure(api, queries[:20], {"semantic_cache": False})  # warm up
                baseline = None
                for label, body in ROWS:
                    m = measure(api, queries, {**body, "semantic_cache": False})
                    baseline = baseline or m
                    print(row(name, label, m, baseline if m is not baseline else None), flush=True)
                api.delete("/api/kb/cache").raise_for_status()
                shared = measure(api, queries, {"strategy": "hybrid"})
                print(row(name, "semantic cache, 1st pass", shared, baseline)
                      + f"   ({shared['hits']:.1%} served from other users' similar questions)", flush=True)
                repeat = measure(api, queries, {"strategy": "hybrid"})
                print(row(name, "semantic cache, repeat", repeat, baseline) + f"   ({repeat['hits']:.1%} hits, "
                      "each embedding its query again)", flush=True)
                stats = api.get("/api/kb/cache").json()
                print(f"{'':<9} cache: {stats['entries']} entries, hit rate {stats['hit_rate']:.1%}, "
                      f"{stats['stale']} stale", flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", type=Path, default=ROOT.parent / "shared" / "datasets")
    parser.add_argument("--limit", type=int, default=None, help="queries per dataset (default: all)")
    run(parser.parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(main())

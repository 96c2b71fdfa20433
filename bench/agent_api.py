"""The agent API under load, and what agentic retrieval costs in search-LLM tokens.

(a) ``invoke`` and ``invoke-stream`` at 50 concurrent callers (closed loop) against a gateway
    subprocess on the shipped defaults (fastembed embeddings on, StackFAQ's 125 topics loaded, Qdrant
    on disk) behind an instant fake LLM: p50/p99, calls/s and, for the stream, time to the first
    byte — with bench/turn_floor.py's floor (the same Redis and LLM calls, nothing else) measured in
    the same run, and the ratio of throughputs.
(b) On StackFAQ's dev split, in process: the tokens a search LLM reads per question with
    ``hybrid_llm`` (its selection prompt) against agentic retrieval (the tool's description plus the
    ``query_knowledge`` result the reply model reads), and each one's hit@1.

    python bench/agent_api.py [--duration 10] [--queries 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.harness import free_port, stop_all, wait_http  # noqa: E402

PY = sys.executable
MODEL = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2"
STACKFAQ = ROOT.parent / "shared" / "datasets" / "stackfaq"
ADMIN = {"Authorization": "Bearer bench-admin"}


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))] if ordered else float("nan")


async def load(base: str, paths: list[str], headers: dict, body_of, duration_s: float, stream: bool) -> dict:
    latencies: list[float] = []
    firsts: list[float] = []
    errors = 0
    stop_at = time.perf_counter() + duration_s
    async with aiohttp.ClientSession(base, connector=aiohttp.TCPConnector(limit=200)) as http:
        async def caller(path: str) -> None:
            nonlocal errors
            i = 0
            while time.perf_counter() < stop_at:
                t0 = time.perf_counter()
                async with http.post(path, json=body_of(i), headers=headers) as r:
                    if stream:
                        first = None
                        async for _ in r.content.iter_any():
                            first = first or time.perf_counter()
                        if first:
                            firsts.append((first - t0) * 1000)
                    else:
                        await r.read()
                    if r.status == 200:
                        latencies.append((time.perf_counter() - t0) * 1000)
                    else:
                        errors += 1
                i += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(caller(p) for p in paths))
        elapsed = time.perf_counter() - t0
    return {"p50": statistics.median(latencies) if latencies else float("nan"), "p99": pct(latencies, 99),
            "rate": len(latencies) / elapsed, "ttfb50": statistics.median(firsts) if firsts else None,
            "ttfb99": pct(firsts, 99) if firsts else None, "errors": errors}


def start(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def part_a(args) -> None:
    redis_url = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
    agent = "benchapi" + uuid.uuid4().hex[:6]
    llm_port, gw_port, floor_port = free_port(), free_port(), free_port()
    llm_url = f"http://127.0.0.1:{llm_port}/v1"
    env = {"SWITCHBOARD_REDIS_URL": redis_url, "SWITCHBOARD_AGENT_ID": agent, "SWITCHBOARD_LLM_BASE_URL": llm_url,
           "SWITCHBOARD_LLM_API_KEY": "bench", "SWITCHBOARD_ADMIN_TOKEN": "bench-admin",
           "SWITCHBOARD_LOG_LEVEL": "WARNING", "SWITCHBOARD_DATA_DIR": tempfile.mkdtemp(prefix="sb-bench-api-"),
           "SWITCHBOARD_API_KEY_RATE_LIMIT_PER_MIN": "1000000"}
    if MODEL.exists():
        env["SWITCHBOARD_EMBEDDING_MODEL_PATH"] = str(MODEL)
    procs = [start([PY, "bench/instant_llm.py", str(llm_port)], {})]
    try:
        procs.append(start([PY, "-m", "gateway", "serve", "--port", str(gw_port)], env))
        procs.append(start([PY, "-m", "uvicorn", "bench.turn_floor:app", "--port", str(floor_port), "--log-level",
                            "warning", "--no-access-log"], {"FLOOR_REDIS_URL": redis_url, "FLOOR_LLM_URL": llm_url}))
        base = f"http://127.0.0.1:{gw_port}"
        wait_http(base + "/readyz", timeout_s=120)
        with open(STACKFAQ / "topics.jsonl", "rb") as topics:
            import httpx

            with httpx.Client(base_url=base, headers=ADMIN, timeout=300) as api:
                api.post("/api/kb/import?format=jsonl", content=topics.read()).raise_for_status()
                made = api.post("/v1/agents", json={"name": "bench", "config": {"limit": 3}}).json()
                key = api.post("/api/keys", json={"name": "bench", "agents": [made["id"]]}).json()["key"]
        auth = {"Authorization": f"Bearer {key}"}
        questions = [json.loads(line)["query"] for line in (STACKFAQ / "queries.dev.jsonl").read_text().splitlines()]

        def body(i: int) -> dict:
            return {"messages": [{"role": "user", "content": questions[i % len(questions)]}]}

        invoke = f"/v1/agents/{made['id']}/versions/latest/invoke"
        floor_base = f"http://127.0.0.1:{floor_port}"
        floor_paths = [f"/turn/{uuid.uuid4().hex}" for _ in range(50)]
        asyncio.run(load(floor_base, floor_paths[:5], {}, lambda i: {"text": "warm"}, 2, False))
        floor = asyncio.run(load(floor_base, floor_paths, {}, lambda i: {"text": questions[i % len(questions)]},
                                 args.duration, False))
        asyncio.run(load(base, [invoke] * 5, auth, body, 2, False))  # warm up
        plain = asyncio.run(load(base, [invoke] * 50, auth, body, args.duration, False))
        streamed = asyncio.run(load(base, [invoke + "-stream"] * 50, auth, body, args.duration, True))
    finally:
        stop_all(procs)
        r = redis.Redis.from_url(redis_url)
        for pattern in (f"sb:{agent}:*", "sb:floor:*", f"rq:*sb:{agent}:*"):
            keys = list(r.scan_iter(match=pattern, count=1000))
            for i in range(0, len(keys), 500):
                r.delete(*keys[i:i + 500])
    print(f"(a) 50 concurrent callers, {args.duration:.0f} s each, instant fake LLM, embeddings on, 125 topics")
    print(f"{'':16} {'p50 ms':>8} {'p99 ms':>8} {'calls/s':>8} {'TTFB p50':>9} {'TTFB p99':>9} {'errors':>7}")
    for name, m in (("floor", floor), ("invoke", plain), ("invoke-stream", streamed)):
        ttfb = (f"{m['ttfb50']:9.1f} {m['ttfb99']:9.1f}" if m["ttfb50"] is not None else f"{'—':>9} {'—':>9}")
        print(f"{name:16} {m['p50']:8.1f} {m['p99']:8.1f} {m['rate']:8.1f} {ttfb} {m['errors']:7d}")
    for name, m in (("invoke", plain), ("invoke-stream", streamed)):
        print(f"throughput ratio {name}/floor: {m['rate'] / floor['rate']:.2f}")


async def part_b(args) -> None:
    from gateway.core.settings import Settings
    from gateway.knowledge.kb_tool import SPEC, KnowledgeTool
    from gateway.knowledge.search import Knowledge
    from gateway.turn.llm import LLMClient
    from rag_core.evaluation import load_queries
    from rag_core.ingestion import import_file
    from rag_core.tokens import estimate_tokens

    # A search LLM that does not answer (a closed port): hybrid_llm builds and counts its selection
    # prompt, then falls back to the fused order — the prompt is what is measured here.
    settings = Settings(_env_file=None, agent_id="benchtokens", data_dir=Path(tempfile.mkdtemp()),
                        qdrant_url=":memory:", embedding_model_path=MODEL if MODEL.exists() else None,
                        llm_base_url="http://127.0.0.1:9/v1", llm_api_key="none", llm_max_retries=0)
    llm = LLMClient(settings)
    knowledge = Knowledge(settings, llm)
    knowledge.open()
    await import_file(knowledge.kb, STACKFAQ / "topics.jsonl")
    tool = KnowledgeTool(knowledge)
    cases = load_queries(STACKFAQ / "queries.dev.jsonl")[:args.queries]
    spec_tokens = estimate_tokens(json.dumps(SPEC))
    selection, agentic, hit_sel, hit_agentic = [], [], 0, 0
    for case in cases:
        found = await knowledge.search(case.query, strategy="hybrid_llm", k=3)
        selection.append(found.prompt_tokens or 0)
        hit_sel += bool(found.hits) and found.hits[0].topic.source in case.gold
        arguments = json.dumps({"action": "query", "kb_id": "main", "query_text": case.query, "top_k": 5})
        result, trace = await tool.run(arguments)
        agentic.append(spec_tokens + estimate_tokens(arguments) + estimate_tokens(result))
        hit_agentic += bool(trace.sources) and trace.sources[0] in case.gold
    knowledge.close()
    await llm.aclose()
    n = len(cases)
    print(f"\n(b) StackFAQ dev, {n} questions, search-LLM tokens read per question (estimated as the gateway does)")
    print(f"hybrid_llm selection prompt: mean {statistics.mean(selection):.0f}, p50 {statistics.median(selection):.0f}"
          f"; hit@1 of its candidates' order {hit_sel / n:.3f} (no LLM here: the fused order)")
    print(f"agentic (tool description + call + result, one query): mean {statistics.mean(agentic):.0f}, "
          f"p50 {statistics.median(agentic):.0f}; hit@1 of the tool's first result {hit_agentic / n:.3f}")
    print(f"ratio agentic/hybrid_llm: {statistics.mean(agentic) / statistics.mean(selection):.2f} "
          "(agentic adds no separate search call: the reply model reads these tokens itself)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    part_a(args)
    asyncio.run(part_b(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

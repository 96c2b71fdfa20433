"""Turn overhead of the gateway against a floor, both behind the same instant fake LLM and Redis.

(a) latency: open loop, 20 turns/s spread over 20 conversations, p50/p99 per turn (measured from
    the scheduled send time, so queueing counts);
(b) throughput: closed loop, 50 concurrent conversations, turns/s and the ratio to the floor;
(c) the split of a turn's CPU by stage (accept, memory, retrieval with its embedding / sparse / dense legs,
    prompt, LLM call, delivery) and its Redis round trips, read from the turn traces of 40 turns sent one at
    a time afterwards.

Two gateways are measured against the same floor in one run:
- ``retrieval`` (what users run, the shipped defaults): embeddings on (all-MiniLM-L6-v2), the 651 OR-ShARC
  topics loaded, the default strategy for a configured LLM (hybrid_llm: the instant LLM answers the search
  prompt with a valid "none" selection), semantic cache on; messages are OR-ShARC dev questions;
- ``no-retrieval``: ``SWITCHBOARD_EMBEDDINGS=none`` and an empty knowledge base (the old mode).

The floor (bench/turn_floor.py) is a bare ASGI endpoint doing the same Redis reads/writes and the
same LLM call, and no retrieval. Everything runs on this machine: Redis on 127.0.0.1:6379 (or BENCH_REDIS_URL).
Run: .venv/bin/python bench/turn_overhead.py [--duration 15] [--retrieval | --no-retrieval]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import aiohttp
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import free_port, stop_all, wait_http, wait_port  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
DATASETS = ROOT.parent / "shared" / "datasets"
MODEL = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2"
QUESTIONS = [json.loads(line)["query"] for line in
             (DATASETS / "orsharc" / "queries.dev.jsonl").read_text().splitlines() if line]


def start(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def open_loop(post, targets: list[str], rate: float, duration_s: float) -> tuple[list[float], int]:
    latencies: list[float] = []
    errors = 0
    total = int(rate * duration_s)
    t0 = time.perf_counter() + 0.2

    async def one(i: int) -> None:
        nonlocal errors
        scheduled = t0 + i / rate
        await asyncio.sleep(max(0.0, scheduled - time.perf_counter()))
        ok = await post(targets[i % len(targets)], QUESTIONS[i % len(QUESTIONS)])
        if ok:
            latencies.append((time.perf_counter() - scheduled) * 1000)
        else:
            errors += 1

    await asyncio.gather(*(one(i) for i in range(total)))
    return latencies, errors


async def closed_loop(post, targets: list[str], duration_s: float) -> tuple[float, int]:
    done = 0
    errors = 0
    stop_at = time.perf_counter() + duration_s

    async def worker(target: str) -> None:
        nonlocal done, errors
        i = 0
        while time.perf_counter() < stop_at:
            if await post(target, QUESTIONS[(i * 7 + len(target)) % len(QUESTIONS)]):
                done += 1
            else:
                errors += 1
            i += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(t) for t in targets))
    return done / (time.perf_counter() - t0), errors


async def measure(base: str, gateway: bool, duration_s: float) -> dict:
    connector = aiohttp.TCPConnector(limit=200)
    async with aiohttp.ClientSession(base, connector=connector) as http:
        async def make_targets(n: int) -> list[str]:
            if not gateway:
                return [f"/turn/{uuid.uuid4().hex}" for _ in range(n)]
            targets = []
            for _ in range(n):
                async with http.post("/api/chat/sessions") as r:
                    s = await r.json()
                targets.append(f"/api/chat/sessions/{s['session_id']}/messages|{s['token']}")
            return targets

        async def post(target: str, text: str) -> bool:
            path, _, token = target.partition("|")
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            async with http.post(path, json={"text": text}, headers=headers) as r:
                await r.read()
                return r.status == 200

        # warm up connections, JIT-less caches, Redis scripts
        warm = await make_targets(5)
        await asyncio.gather(*(post(t, "warm") for t in warm for _ in range(3)))
        lat, lat_err = await open_loop(post, await make_targets(20), 20.0, duration_s)
        tput, tput_err = await closed_loop(post, await make_targets(50), duration_s)
    return {"p50": statistics.median(lat), "p99": pct(lat, 99), "n": len(lat), "lat_errors": lat_err,
            "tput": tput, "tput_errors": tput_err}


def gateway_env(mode: str, agent: str, redis_url: str, llm_url: str) -> dict[str, str]:
    env = {"SWITCHBOARD_REDIS_URL": redis_url, "SWITCHBOARD_AGENT_ID": agent, "SWITCHBOARD_LLM_BASE_URL": llm_url,
           "SWITCHBOARD_LLM_API_KEY": "bench", "SWITCHBOARD_LOG_LEVEL": "WARNING",
           "SWITCHBOARD_DATA_DIR": f"/tmp/{agent}", "SWITCHBOARD_ADMIN_TOKEN": "bench-admin",
           # One loopback client sends every turn: the web-chat limits stay on (each message still pays
           # for its counts) but high enough that the load generator is never refused.
           "SWITCHBOARD_WEBCHAT_SESSIONS_PER_ADDRESS": "1000000", "SWITCHBOARD_WEBCHAT_MESSAGES_PER_ADDRESS": "1000000",
           "SWITCHBOARD_WEBCHAT_MESSAGES_PER_SESSION": "1000000"}
    if mode == "no-retrieval":
        return {**env, "SWITCHBOARD_EMBEDDINGS": "none", "SWITCHBOARD_QDRANT_URL": ":memory:"}
    return {**env, "SWITCHBOARD_EMBEDDING_MODEL_PATH": str(MODEL)}  # shipped defaults otherwise


def run_gateway(mode: str, redis_url: str, llm_url: str, duration: float) -> dict:
    agent = "bench" + uuid.uuid4().hex[:8]
    port = free_port()
    proc = start([PY, "-m", "gateway", "serve", "--port", str(port)], gateway_env(mode, agent, redis_url, llm_url))
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/readyz", timeout_s=180)
        admin = {"Authorization": "Bearer bench-admin"}
        if mode == "retrieval":
            topics = (DATASETS / "orsharc" / "topics.jsonl").read_bytes()
            with urllib.request.urlopen(urllib.request.Request(
                    f"{base}/api/kb/import?format=jsonl", data=topics, headers=admin, method="POST"), timeout=600):
                pass
        time.sleep(1.0)
        result = asyncio.run(measure(base, True, duration))
        cpu0 = process_cpu_ms(proc.pid)
        result["split"] = cpu_split(base, redis_url, agent)
        result["process_cpu_ms"] = (process_cpu_ms(proc.pid) - cpu0) / SERIAL_TURNS
        with urllib.request.urlopen(urllib.request.Request(f"{base}/api/kb/cache", headers=admin), timeout=30) as r:
            result["cache"] = json.loads(r.read())
        return result
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        clean(redis_url, agent)


SERIAL_TURNS = 100


def process_cpu_ms(pid: int) -> float:
    """The process's own CPU time so far (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def floor_serial_cpu(base: str, pid: int) -> float:
    """The floor's CPU ms per turn over SERIAL_TURNS turns sent one at a time (as ``cpu_split`` sends the
    gateway's), from its process's own CPU time."""
    conversation = uuid.uuid4().hex
    cpu0 = process_cpu_ms(pid)
    for i in range(SERIAL_TURNS):
        body = json.dumps({"text": QUESTIONS[(i * 13) % len(QUESTIONS)]}).encode()
        request = urllib.request.Request(f"{base}/turn/{conversation}", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as r:
            r.read()
    return (process_cpu_ms(pid) - cpu0) / SERIAL_TURNS


def cpu_split(base: str, redis_url: str, agent: str) -> dict[str, float]:
    """Per-stage cost of a turn from the turn traces, over turns sent one at a time (so the process CPU a
    stage records is that turn's own): mean ms per turn."""
    with urllib.request.urlopen(urllib.request.Request(f"{base}/api/chat/sessions", method="POST"), timeout=30) as r:
        session = json.loads(r.read())
    ids = []
    for i in range(SERIAL_TURNS):
        body = json.dumps({"text": QUESTIONS[(i * 13) % len(QUESTIONS)]}).encode()
        request = urllib.request.Request(
            f"{base}/api/chat/sessions/{session['session_id']}/messages", data=body, method="POST",
            headers={"Authorization": f"Bearer {session['token']}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as r:
            ids.append(json.loads(r.read())["turn_id"])
    client = redis.Redis.from_url(redis_url)
    traces = [json.loads(raw) for raw in client.mget([f"sb:{agent}:trace:{i}" for i in ids]) if raw]
    split: dict[str, float] = {}
    for trace in traces:
        for stage in trace["stages"]:
            split[f"cpu {stage['stage']}"] = split.get(f"cpu {stage['stage']}", 0.0) + (stage.get("cpu_ms") or 0.0)
        retrieval = (trace.get("retrieval") or {}).get("timings_ms", {})
        for leg in ("embed", "sparse", "dense", "fuse", "llm"):
            name = f"wall {'search llm' if leg == 'llm' else leg}"
            split[name] = split.get(name, 0.0) + retrieval.get(f"strategy_{leg}", 0.0)
        split["redis round trips"] = split.get("redis round trips", 0.0) + trace.get("redis_round_trips", 0)
        split["cpu redis client"] = split.get("cpu redis client", 0.0) + trace.get("redis_cpu_ms", 0.0)
        split["wall total"] = split.get("wall total", 0.0) + trace["total_ms"]
    return {k: v / max(1, len(traces)) for k, v in split.items()}


def print_split(mode: str, split: dict[str, float]) -> None:
    stages = ["accept", "lock_wait", "memory", "context", "prompt", "llm", "deliver"]
    cpu = sum(split.get(f"cpu {s}", 0.0) for s in stages)
    print(f"{mode}: a turn's CPU, mean of {SERIAL_TURNS} turns sent one at a time (from the traces): "
          f"{cpu:.2f} ms CPU in {split.get('wall total', 0.0):.2f} ms")
    print("  CPU by stage: " + ", ".join(f"{s} {split.get(f'cpu {s}', 0.0):.2f}" for s in stages)
          + " ms  (context = retrieval; llm = the reply call)")
    legs = ["embed", "sparse", "dense", "fuse", "search llm"]
    print("  retrieval legs (wall; embedding and sparse run side by side): "
          + ", ".join(f"{leg} {split.get(f'wall {leg}', 0.0):.2f}" for leg in legs) + " ms")
    print(f"  Redis: {split.get('redis round trips', 0.0):.1f} round trips per turn, "
          f"{split.get('cpu redis client', 0.0):.2f} ms client CPU (inside the stages above)")


def clean(redis_url: str, agent: str) -> None:
    r = redis.Redis.from_url(redis_url)
    for pattern in (f"sb:{agent}:*", "sb:floor:*", f"rq:*sb:{agent}:*"):
        keys = list(r.scan_iter(match=pattern, count=1000))
        for i in range(0, len(keys), 500):
            r.delete(*keys[i:i + 500])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=15.0, help="seconds per phase")
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--retrieval", action="store_const", const=["retrieval"], dest="modes",
                      help="only the shipped defaults (dense + BM25, 651 topics)")
    only.add_argument("--no-retrieval", action="store_const", const=["no-retrieval"], dest="modes",
                      help="only embeddings off and an empty knowledge base")
    args = ap.parse_args()
    modes = args.modes or ["retrieval", "no-retrieval"]
    redis_url = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
    llm_port, floor_port = free_port(), free_port()
    llm_url = f"http://127.0.0.1:{llm_port}/v1"
    procs = [start([PY, "bench/instant_llm.py", str(llm_port)], {})]
    results: dict[str, dict] = {}
    try:
        procs.append(start(
            [PY, "-m", "uvicorn", "bench.turn_floor:app", "--port", str(floor_port), "--log-level", "warning",
             "--no-access-log"],
            {"FLOOR_REDIS_URL": redis_url, "FLOOR_LLM_URL": llm_url},
        ))
        wait_port(floor_port)
        results["floor"] = asyncio.run(measure(f"http://127.0.0.1:{floor_port}", False, args.duration))
        results["floor"]["process_cpu_ms"] = floor_serial_cpu(f"http://127.0.0.1:{floor_port}", procs[1].pid)
        for mode in modes:
            results[mode] = run_gateway(mode, redis_url, llm_url, args.duration)
    finally:
        stop_all(procs)
        clean(redis_url, "floor")

    print(f"turn overhead — instant fake LLM, Redis {redis_url}, {args.duration:.0f}s per phase")
    print(f"{'':13} {'p50 ms @20/s':>13} {'p99 ms @20/s':>13} {'turns/s @50':>12} {'ratio':>6} {'errors':>7}")
    floor = results["floor"]
    for name, m in results.items():
        ratio = m["tput"] / floor["tput"] if floor["tput"] else float("nan")
        print(f"{name:13} {m['p50']:13.1f} {m['p99']:13.1f} {m['tput']:12.1f} {ratio:6.2f} "
              f"{m['lat_errors'] + m['tput_errors']:7d}")
    floor_cpu = floor["process_cpu_ms"]
    print(f"CPU per serial turn, the process's own CPU time over {SERIAL_TURNS} turns sent one at a time: "
          f"floor {floor_cpu:.2f} ms")
    for mode in modes:
        own = results[mode]["process_cpu_ms"]
        print(f"  {mode}: {own:.2f} ms = {own / floor_cpu:.2f}x the floor")
    for mode in modes:
        print_split(mode, results[mode]["split"])
    for mode in modes:
        cache = results[mode].get("cache", {})
        if cache.get("enabled"):
            print(f"{mode}: semantic cache {cache['hit']} hits / {cache['miss']} misses during the run")
    print("targets (issue 27): CPU per serial turn <= 1.5x the floor (no-retrieval), <= 4x (retrieval); "
          "retrieval throughput ratio >= 0.55 and p99 <= 30 ms at 20/s; Redis round trips: "
          "tests/channels/test_turn_round_trips.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

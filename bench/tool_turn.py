"""What a tool call costs the gateway: a web-chat turn whose model calls one MCP tool, against a plain turn.

Shipped defaults (embeddings on with all-MiniLM-L6-v2, the demo knowledge base loaded, the default strategy),
the instant fake LLM (bench/instant_llm.py: offered tools, it asks for ``crm__book_table`` once, then answers)
and a real MCP server (bench/instant_mcp.py: the SDK's FastMCP, streamable HTTP, a tool that answers at once),
both in their own processes, so the gateway process's CPU time is the gateway's alone.

Turns are sent one at a time: first SERIAL_TURNS plain turns (the agent has no tools), then SERIAL_TURNS tool
turns (the agent's ``config.tools`` is ``crm.book_table``). Printed:
- the gateway process's CPU per turn (from /proc) for each, and the difference per tool call; less the
  cost of the extra model round (the plain turn's ``llm`` stage CPU), that is the tool call's own cost
  (target, issue 40: <= 1.5 ms);
- Redis round trips per turn from the traces (target: a tool turn <= 2 more than a plain turn);
- hostile tools (one that hangs, one answering 20 MB, one answering broken JSON-RPC), HOSTILE_TURNS turns
  each: the slowest answer against the turn deadline, the error the trace names, and the gateway's RSS
  growth over them (target: < 50 MB).
Redis on 127.0.0.1:6379 (or BENCH_REDIS_URL), keys under a fresh agent id, removed afterwards.
Run: .venv/bin/python bench/tool_turn.py [--turns 60]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import free_port, stop_all, wait_http, wait_port  # noqa: E402
from bench.turn_overhead import MODEL, PY, QUESTIONS, clean, process_cpu_ms, start  # noqa: E402

UNIQUE = list(dict.fromkeys(QUESTIONS))  # the dev set repeats questions: each asked once
WARM_UP = 20  # turns first sent in each phase, not counted
DEADLINE_S = 60.0  # SWITCHBOARD_TURN_DEADLINE_S's default
ADMIN = {"Authorization": "Bearer bench-admin", "Content-Type": "application/json"}


def call(base: str, method: str, path: str, body: dict | None = None, headers: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(request, timeout=60) as r:
        raw = r.read()
    return json.loads(raw) if raw else {}


class Chat:
    def __init__(self, base: str) -> None:
        self.base = base
        session = call(base, "POST", "/api/chat/sessions")
        self.path = f"/api/chat/sessions/{session['session_id']}/messages"
        self.auth = {"Authorization": f"Bearer {session['token']}"}

    def say(self, text: str) -> str:
        return call(self.base, "POST", self.path, {"text": text}, self.auth)["turn_id"]


def serial(base: str, pid: int, turns: int, first: int) -> tuple[float, list[str]]:
    """CPU ms of the gateway process per turn over ``turns`` turns sent one at a time, and their ids; the
    questions from ``first`` on (each phase its own: a question asked before would find its embedding cached)."""
    chat = Chat(base)
    for i in range(WARM_UP):
        chat.say(UNIQUE[(first + i) % len(UNIQUE)])
    cpu0 = process_cpu_ms(pid)
    ids = [chat.say(UNIQUE[(first + WARM_UP + i) % len(UNIQUE)]) for i in range(turns)]
    return (process_cpu_ms(pid) - cpu0) / turns, ids


def settle(pid: int, timeout_s: float = 300) -> None:
    """Until the gateway is idle (under 2% CPU over a second): the demo knowledge base is loaded and indexed
    in the background at start, and its CPU would count in the first phase's."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = process_cpu_ms(pid)
        time.sleep(1.0)
        if process_cpu_ms(pid) - before < 20:
            return
    raise RuntimeError("the gateway did not settle")


def uses_tools(base: str, redis_url: str, agent: str, tools: list[dict]) -> None:
    """Give the agent these tools and wait until a turn shows it (the channels re-read the agent every 5 s)."""
    call(base, "PATCH", f"/v1/agents/{agent}", {"config": {"tools": tools}}, ADMIN)
    chat, deadline = Chat(base), time.monotonic() + 30
    while bool(traces(redis_url, agent, [chat.say(f"book a table {time.time()}")])[0]["tool_calls"]) != bool(tools):
        assert time.monotonic() < deadline, "the agent's tools did not change within 30 s"
        time.sleep(0.5)


HOSTILE_TURNS = 4
HOSTILE = {"hangs": "crm__slow_lookup", "answers 20 MB": "crm__huge", "answers broken JSON-RPC": "crm__broken"}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def hostile(base: str, redis_url: str, agent: str, pid: int) -> tuple[float, float, dict[str, tuple[float, str]]]:
    """RSS before and after HOSTILE_TURNS turns per hostile tool (one of each first, to warm up), and per
    tool the slowest turn's seconds and the error its trace names."""
    chat = Chat(base)
    for wire in HOSTILE.values():
        chat.say(f"warm use:{wire}")
    before = rss_mb(pid)
    seen: dict[str, tuple[float, str]] = {}
    for what, wire in HOSTILE.items():
        slowest, error = 0.0, ""
        for i in range(HOSTILE_TURNS):
            t0 = time.monotonic()
            turn_id = chat.say(f"order {i} use:{wire}")
            slowest = max(slowest, time.monotonic() - t0)
            [trace] = traces(redis_url, agent, [turn_id])
            error = " ".join((trace["tool_calls"][0]["error"] or "(none)").split())
        seen[what] = (slowest, error)
    return before, rss_mb(pid), seen


def traces(redis_url: str, agent: str, ids: list[str]) -> list[dict]:
    client = redis.Redis.from_url(redis_url)
    return [json.loads(raw) for raw in client.mget([f"sb:{agent}:trace:{i}" for i in ids]) if raw]


def stage_cpu(found: list[dict], stage: str) -> float:
    return statistics.mean(sum(s.get("cpu_ms") or 0.0 for s in t["stages"] if s["stage"] == stage) for t in found)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=60, help="turns per phase, sent one at a time")
    args = ap.parse_args()
    redis_url = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
    llm_port, mcp_port, port = free_port(), free_port(), free_port()
    agent = "benchtool" + uuid.uuid4().hex[:8]
    env = {"SWITCHBOARD_REDIS_URL": redis_url, "SWITCHBOARD_AGENT_ID": agent,
           "SWITCHBOARD_LLM_BASE_URL": f"http://127.0.0.1:{llm_port}/v1", "SWITCHBOARD_LLM_API_KEY": "bench",
           "SWITCHBOARD_LOG_LEVEL": "WARNING", "SWITCHBOARD_DATA_DIR": f"/tmp/{agent}",
           "SWITCHBOARD_ADMIN_TOKEN": "bench-admin", "SWITCHBOARD_DEMO": "true",
           "SWITCHBOARD_EMBEDDING_MODEL_PATH": str(MODEL), "SWITCHBOARD_OUTBOUND_ALLOW_HOSTS": "127.0.0.1",
           "SWITCHBOARD_WEBCHAT_MESSAGES_PER_SESSION": "1000000",
           "SWITCHBOARD_WEBCHAT_MESSAGES_PER_ADDRESS": "1000000"}
    procs = [start([PY, "bench/instant_llm.py", str(llm_port)], {}),
             start([PY, "bench/instant_mcp.py", str(mcp_port), "600"], {})]  # slow_lookup: hangs
    try:
        gateway = start([PY, "-m", "gateway", "serve", "--port", str(port)], env)
        procs.append(gateway)
        base = f"http://127.0.0.1:{port}"
        wait_port(llm_port)
        wait_port(mcp_port)
        wait_http(f"{base}/readyz", timeout_s=180)
        source = call(base, "POST", "/api/tool-sources",
                      {"kind": "mcp", "name": "crm", "url": f"http://127.0.0.1:{mcp_port}/mcp"}, ADMIN)
        assert source["tools"], source
        settle(gateway.pid)
        # plain, tool, plain again: what changes with the process's age shows as a difference of the two plains
        step = WARM_UP + args.turns
        plain_cpu, plain_ids = serial(base, gateway.pid, args.turns, 0)
        uses_tools(base, redis_url, agent, [{"name": "crm.book_table"}])
        tool_cpu, tool_ids = serial(base, gateway.pid, args.turns, step)
        uses_tools(base, redis_url, agent, [])
        again_cpu, again_ids = serial(base, gateway.pid, args.turns, 2 * step)
        plain = traces(redis_url, agent, plain_ids) + traces(redis_url, agent, again_ids)
        tool = traces(redis_url, agent, tool_ids)
        uses_tools(base, redis_url, agent, [{"name": "crm.*"}])
        rss_before, rss_after, hostile_seen = hostile(base, redis_url, agent, gateway.pid)
        plain_cpu = (plain_cpu + again_cpu) / 2
    finally:
        stop_all(procs)
        clean(redis_url, agent)
    calls = statistics.mean(len(t["tool_calls"]) for t in tool)
    assert calls >= 1 and all(c["error"] is None for t in tool for c in t["tool_calls"]), tool[0]["tool_calls"]
    model_round = stage_cpu(plain, "llm")
    extra = (tool_cpu - plain_cpu) / calls
    in_stage = (stage_cpu(tool, "llm") - 2 * model_round) / calls
    plain_rt = statistics.mean(t["redis_round_trips"] for t in plain)
    tool_rt = statistics.mean(t["redis_round_trips"] for t in tool)
    tool_ms = statistics.mean(c["ms"] for t in tool for c in t["tool_calls"])
    print(f"tool turn — instant fake LLM, real MCP server (FastMCP, streamable HTTP), Redis {redis_url}, "
          f"{args.turns} turns per phase one at a time, shipped defaults (embeddings on, demo KB)")
    print(f"  gateway CPU per turn: plain {plain_cpu:.2f} ms (before {plain_cpu * 2 - again_cpu:.2f}, "
          f"after {again_cpu:.2f}), with {calls:.0f} tool call(s) {tool_cpu:.2f} ms "
          f"(llm stage CPU: plain {model_round:.2f} ms, tool turn {stage_cpu(tool, 'llm'):.2f} ms)")
    print(f"  per tool call, from the process: {extra:.2f} ms more CPU; less one extra model round "
          f"({model_round:.2f} ms): {extra - model_round:.2f} ms  (target <= 1.5 ms)")
    print(f"  per tool call, from the traces: the tool turn's llm stage less two plain model rounds: "
          f"{in_stage:.2f} ms  (target <= 1.5 ms)")
    stages = ["accept", "lock_wait", "memory", "context", "prompt", "llm", "deliver"]
    for name, found in (("plain", plain), ("tool", tool)):
        print(f"  {name} turn CPU by stage (traces): "
              + ", ".join(f"{st} {stage_cpu(found, st):.2f}" for st in stages) + " ms")
    print(f"  the call's wall time as the trace has it: {tool_ms:.2f} ms")
    print(f"  Redis round trips per turn: plain {plain_rt:.1f}, tool {tool_rt:.1f}: {tool_rt - plain_rt:+.1f}  "
          f"(target <= +2)")
    print(f"  hostile tools, {HOSTILE_TURNS} turns each (turn deadline {DEADLINE_S:g} s):")
    for what, (slowest, error) in hostile_seen.items():
        print(f"    a tool that {what}: slowest answer {slowest:.1f} s; the trace says: {error[:110]}")
    print(f"  gateway RSS {rss_before:.0f} MB before, {rss_after:.0f} MB after: {rss_after - rss_before:+.1f} MB  "
          f"(target < 50 MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

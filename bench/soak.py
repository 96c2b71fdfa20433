"""Soak: mixed traffic for ``--minutes`` while a chaos loop breaks things; nothing acknowledged may be lost.

A real ``switchboard serve`` (``SWITCHBOARD_INBOX_CONSUMER=false``) plus ``--turn-workers``
``switchboard worker`` processes, against a redis-server of its own on a spare port (append-only
file, so a restart keeps what was acknowledged) and fake LLM / Telegram / Slack / Twilio APIs in a
process of their own. Traffic, about ``--rate`` requests a second: web-chat messages, the three
messaging webhooks signed as the vendors sign them (each delivery from a new user; 20% replayed a
few seconds later, as vendors retry) and agent invokes; the fake LLM takes 0.3 s. The chaos loop, in
turns every ``--chaos-every`` seconds: SIGKILL a worker (restarted 2 s later), restart Redis (down
~3 s), make the fake LLM fail for a while (the gateway answers with its fallback message), take
Telegram's sendMessage away for 15 s (replies wait in the inbox and go out when it is back).

Printed: per minute, requests sent, 2xx, 5xx (and how many of those fell in a Redis-down window), replies
received and p99 ack / turn latency; then totals — deliveries sent, replies received, lost
(acknowledged 2xx but never answered after the drain), duplicated (a user answered twice), 5xx inside
and outside the Redis-down windows — and a verdict line.
Target: 0 lost, 0 duplicated, 0 5xx outside the Redis-down window.

Run: .venv/bin/python bench/soak.py [--minutes 30] [--rate 4] [--turn-workers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import free_port, wait_http, wait_port  # noqa: E402
from bench.webhook_ack import BUILDERS, _method, _recipient, gateway_env, pct, start_fakes  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402

ADMIN_TOKEN = "soak-admin-token"
REDIS_GRACE_S = 3.0  # after Redis is back, requests may still fail while pools reconnect
KINDS = ["webchat", "telegram", "slack", "twilio_sms", "invoke"]
WEIGHTS = [0.25, 0.2, 0.2, 0.2, 0.15]


def serve_fakes(conn) -> None:
    """Fake LLM and vendor APIs in their own process; answers the soak's questions over a pipe."""
    llm = FakeOpenAI(default_delay_s=0.3)  # turns are in flight when a worker is killed
    servers, fakes = start_fakes(conn, llm)
    while (command := conn.recv()) != "stop":
        if isinstance(command, tuple) and command[0] == "llm_fail":
            llm.fail_next(500, times=command[1])
            conn.send(True)
        elif isinstance(command, tuple) and command[0] == "telegram_outage":
            fakes["telegram"].recorder.fail_for("sendMessage", 502, command[1], description="Bad Gateway")
            conn.send(True)
        elif command == "llm_heal":
            llm.script.clear()
            conn.send(True)
        elif command == "replies":  # recipient -> the monotonic times it was answered (CLOCK_MONOTONIC is system-wide)
            conn.send({c: _answered(fakes[c], c) for c in BUILDERS})
    for server in servers:
        server.stop()


def _answered(fake, channel: str) -> dict[str, list[float]]:
    times: dict[str, list[float]] = defaultdict(list)
    for call in fake.recorder.received(_method(channel)):
        times[_recipient(channel, call)].append(call.at)
    return dict(times)


def recipient_of(channel: str, i: int) -> str:
    return {"telegram": str(10_000_000 + i), "slack": f"D{i:08d}", "twilio_sms": f"+1555{i:07d}"}[channel]


@dataclass
class Record:
    minute: int
    kind: str
    started: float
    ms: float
    status: int
    replay: bool = False
    recipient: str | None = None


@dataclass
class Soak:
    base: str
    invoke_path: str
    invoke_auth: dict
    records: list[Record] = field(default_factory=list)
    redis_down: list[list[float]] = field(default_factory=list)  # [down at, up at (inf while down)]
    llm_down: list[list[float]] = field(default_factory=list)  # the fake LLM failing: [from, healed at]
    began: float = field(default_factory=time.monotonic)
    chaos_log: list[str] = field(default_factory=list)

    def in_llm_window(self, r: Record) -> bool:
        """An agent-API call answered 502 while the fake LLM failed: the API tells its caller (llm_error),
        where a channel answers its user with the fallback message."""
        end = r.started + r.ms / 1000
        return r.kind == "invoke" and r.status == 502 and any(
            down <= end and r.started <= up for down, up in self.llm_down)

    def in_redis_window(self, r: Record) -> bool:
        end = r.started + r.ms / 1000
        return any(down <= end and r.started <= up + REDIS_GRACE_S for down, up in self.redis_down)

    async def one(self, http: aiohttp.ClientSession, kind: str, i: int, replay: bool = False) -> None:
        started = time.monotonic()
        minute = int((started - self.began) // 60)
        recipient = None
        status = 0
        try:
            if kind == "webchat":
                # Each visitor comes from an address of its own, through a proxy the gateway trusts
                # (SWITCHBOARD_TRUSTED_PROXIES): one loopback address for all would hit the
                # per-address limits, which is what they are for, but not what this soak measures.
                visitor = {"X-Forwarded-For": f"198.51.{i // 250 % 250}.{i % 250 + 1}"}
                async with http.post(self.base + "/api/chat/sessions", headers=visitor) as resp:
                    status = resp.status
                    session = await resp.json() if resp.status < 300 else None
                if session is not None:
                    started = time.monotonic()  # the turn is the message, not the session
                    async with http.post(f"{self.base}/api/chat/sessions/{session['session_id']}/messages",
                                         json={"text": f"soak question {i}", "client_message_id": f"c{i}"},
                                         headers={"Authorization": f"Bearer {session['token']}", **visitor}) as resp:
                        status = resp.status
                        body = await resp.json()
                        if status < 300 and not body.get("reply", {}).get("text"):
                            status = 299  # answered 2xx with no reply: counted as lost below
            elif kind == "invoke":
                async with http.post(self.base + self.invoke_path, headers=self.invoke_auth,
                                     json={"messages": [{"role": "user", "content": f"soak {i}"}]}) as resp:
                    status = resp.status
                    await resp.read()
            else:
                path, body, headers = (BUILDERS[kind](i, replay) if kind == "slack" else BUILDERS[kind](i))
                recipient = recipient_of(kind, i)
                async with http.post(self.base + path, data=body, headers=headers) as resp:
                    status = resp.status
                    await resp.read()
        except (TimeoutError, aiohttp.ClientError):
            status = 599  # the connection broke: as bad as a 5xx for the caller
        self.records.append(Record(minute, kind, started, (time.monotonic() - started) * 1000, status, replay,
                                   recipient))

    async def traffic(self, seconds: float, rate: float) -> None:
        rng = random.Random(7)
        tasks: set[asyncio.Task] = set()
        timeout = aiohttp.ClientTimeout(total=90)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            i = 0
            end = self.began + seconds
            while time.monotonic() < end:
                i += 1
                kind = rng.choices(KINDS, WEIGHTS)[0]
                tasks.add(asyncio.create_task(self.one(http, kind, i)))
                if kind in BUILDERS and rng.random() < 0.2:  # the vendor retries it a little later
                    tasks.add(asyncio.create_task(self._replay(http, kind, i, rng.uniform(0.5, 5))))
                tasks = {t for t in tasks if not t.done()}
                await asyncio.sleep(rng.expovariate(rate))
            await asyncio.gather(*tasks)

    async def _replay(self, http: aiohttp.ClientSession, kind: str, i: int, after_s: float) -> None:
        await asyncio.sleep(after_s)
        await self.one(http, kind, i, replay=True)


class Stack:
    """redis-server, the gateway and its workers, restarted by the chaos loop."""

    def __init__(self, env: dict, workdir: Path, redis_port: int, gateway_port: int, turn_workers: int) -> None:
        self.env, self.workdir, self.redis_port, self.gateway_port = env, workdir, redis_port, gateway_port
        self.redis: subprocess.Popen | None = None
        self.gateway: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen | None] = [None] * turn_workers
        self.log = open(workdir / "stack.log", "ab")  # noqa: SIM115 - closed in stop()

    def start_redis(self) -> None:
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--dir", str(self.workdir),
             "--appendonly", "yes", "--appendfsync", "always", "--save", ""],
            stdout=self.log, stderr=self.log)
        wait_port(self.redis_port)

    def stop_redis(self) -> None:
        assert self.redis is not None
        self.redis.terminate()  # a graceful stop: what was acknowledged is in the append-only file
        self.redis.wait(30)

    def start_worker(self, k: int) -> None:
        self.workers[k] = subprocess.Popen([sys.executable, "-m", "gateway", "worker"], cwd=ROOT,
                                           env={**self.env, "SWITCHBOARD_DATA_DIR": str(self.workdir / f"w{k}")},
                                           stdout=self.log, stderr=self.log)

    def start(self) -> None:
        self.start_redis()
        self.gateway = subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", "--host", "127.0.0.1", "--port", str(self.gateway_port)],
            cwd=ROOT, env={**self.env, "SWITCHBOARD_INBOX_CONSUMER": "false"}, stdout=self.log, stderr=self.log)
        for k in range(len(self.workers)):
            self.start_worker(k)
        wait_http(f"http://127.0.0.1:{self.gateway_port}/healthz")

    def stop(self) -> None:
        for proc in (self.gateway, *self.workers):
            if proc is not None and proc.poll() is None:
                proc.terminate()
        for proc in (self.gateway, *self.workers):
            if proc is not None:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        if self.redis is not None and self.redis.poll() is None:
            self.stop_redis()
        self.log.close()


async def chaos(soak: Soak, stack: Stack, fakes, seconds: float, every_s: float) -> None:
    """In turns: SIGKILL a worker, restart Redis, make the LLM fail, take Telegram's sendMessage away."""
    step = 0
    end = soak.began + seconds - every_s / 2
    await asyncio.sleep(every_s)
    while time.monotonic() < end:
        at = f"{time.monotonic() - soak.began:6.1f}s"
        if step % 4 == 0 and stack.workers:
            k = step // 4 % len(stack.workers)
            proc = stack.workers[k]
            assert proc is not None
            proc.send_signal(signal.SIGKILL)
            await asyncio.to_thread(proc.wait)
            soak.chaos_log.append(f"{at} SIGKILL worker {k}")
            await asyncio.sleep(2)
            stack.start_worker(k)
        elif step % 4 == 1:
            window = [time.monotonic(), float("inf")]
            soak.redis_down.append(window)
            await asyncio.to_thread(stack.stop_redis)
            await asyncio.sleep(3)
            await asyncio.to_thread(stack.start_redis)
            window[1] = time.monotonic()
            soak.chaos_log.append(f"{at} Redis restarted (down {window[1] - window[0]:.1f} s)")
        elif step % 4 == 3:  # longer than the channel's own send retries: the inbox waits it out
            fakes.send(("telegram_outage", 15))
            await asyncio.to_thread(fakes.recv)
            soak.chaos_log.append(f"{at} Telegram sendMessage answers 502 for 15 s")
        else:
            window = [time.monotonic(), float("inf")]
            soak.llm_down.append(window)
            fakes.send(("llm_fail", 30))
            await asyncio.to_thread(fakes.recv)
            soak.chaos_log.append(f"{at} fake LLM fails its next 30 calls")
            await asyncio.sleep(min(10, every_s / 2))
            fakes.send("llm_heal")
            await asyncio.to_thread(fakes.recv)
            window[1] = time.monotonic()
        step += 1
        await asyncio.sleep(every_s)


def acked(soak: Soak) -> dict[tuple[str, str], Record]:
    """Webhook deliveries the gateway acknowledged (2xx, first or replayed), by (channel, recipient)."""
    first: dict[tuple[str, str], Record] = {}
    for r in sorted(soak.records, key=lambda r: r.started):
        if r.recipient is not None and 200 <= r.status < 300:
            first.setdefault((r.kind, r.recipient), r)
    return first


def drain(soak: Soak, fakes, timeout_s: float) -> dict[str, dict[str, list[float]]]:
    wanted = acked(soak)
    deadline = time.monotonic() + timeout_s
    while True:
        fakes.send("replies")
        replies = fakes.recv()
        missing = [key for key in wanted if key[1] not in replies[key[0]]]
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(1)
    time.sleep(3)  # a duplicate would come a moment after its original
    fakes.send("replies")
    return fakes.recv()


def report(soak: Soak, replies: dict[str, dict[str, list[float]]], args: argparse.Namespace) -> bool:
    wanted = acked(soak)
    turn_ms: dict[int, list[float]] = defaultdict(list)
    for (channel, recipient), r in wanted.items():
        if recipient in replies[channel]:
            turn_ms[r.minute].append((min(replies[channel][recipient]) - r.started) * 1000)
    for r in soak.records:
        if r.kind in ("webchat", "invoke") and 200 <= r.status < 299:
            turn_ms[r.minute].append(r.ms)
    print(f"soak: {args.minutes:g} min, ~{args.rate:g} requests/s, {args.turn_workers} worker(s), "
          f"chaos every {args.chaos_every:g} s ({len(soak.chaos_log)} events)")
    for line in soak.chaos_log:
        print("  chaos", line)
    print(f"{'min':>3} {'sent':>5} {'2xx':>5} {'5xx':>4} {'in Redis window':>15} {'replies':>7} "
          f"{'p99 ack ms':>10} {'p99 turn ms':>11}")
    minutes = sorted({r.minute for r in soak.records})
    for m in minutes:
        rows = [r for r in soak.records if r.minute == m]
        bad = [r for r in rows if r.status >= 500]
        acks = [r.ms for r in rows if r.recipient is not None and 200 <= r.status < 300]
        answered = sum(1 for (c, rec), r in wanted.items() if r.minute == m and rec in replies[c]) + sum(
            1 for r in rows if r.kind in ("webchat", "invoke") and 200 <= r.status < 299)
        print(f"{m:>3} {len(rows):>5} {sum(200 <= r.status < 300 for r in rows):>5} {len(bad):>4} "
              f"{sum(soak.in_redis_window(r) for r in bad):>15} {answered:>7} "
              f"{pct(acks, 0.99) if acks else 0:>10.1f} {pct(turn_ms[m], 0.99) if turn_ms[m] else 0:>11.1f}")
    deliveries = [r for r in soak.records if not r.replay]
    lost = [key for key in wanted if key[1] not in replies[key[0]]]
    lost_sync = [r for r in soak.records if r.status == 299]
    dups = sum(len(times) - 1 for c in BUILDERS for times in replies[c].values() if len(times) > 1)
    bad = [r for r in soak.records if r.status >= 500]
    llm = [r for r in bad if not soak.in_redis_window(r) and soak.in_llm_window(r)]
    outside = [r for r in bad if not soak.in_redis_window(r) and not soak.in_llm_window(r)]
    received = sum(len(t) for c in BUILDERS for t in replies[c].values()) + sum(
        1 for r in soak.records if r.kind in ("webchat", "invoke") and 200 <= r.status < 299)
    print(f"deliveries sent: {len(deliveries)} (+{len(soak.records) - len(deliveries)} replays) "
          f"{dict(Counter(r.kind for r in deliveries))}")
    print(f"replies received: {received}; lost: {len(lost) + len(lost_sync)}; duplicated: {dups}; "
          f"5xx: {len(bad)} ({len(bad) - len(outside) - len(llm)} in a Redis-down window, {len(llm)} agent-API "
          f"502 llm_error while the LLM failed, {len(outside)} outside both)")
    refused = Counter((r.kind, r.status) for r in soak.records if 300 <= r.status < 500)
    print(f"other answers (3xx/4xx, e.g. 429 rate limits, 0 = connection failed): {dict(refused) or 'none'}"
          + (f"; no answer: {sum(r.status == 0 for r in soak.records)}" if any(r.status == 0 for r in soak.records)
             else ""))
    if outside:
        print("5xx outside the Redis-down windows:", dict(Counter((r.kind, r.status) for r in outside)))
    if lost:
        print("lost (first 10):", lost[:10])
    ok = not lost and not lost_sync and dups == 0 and not outside
    print(f"VERDICT: {'PASS' if ok else 'FAIL'} (target: 0 lost, 0 duplicated, 0 5xx outside the Redis-down "
          "window; the agent API's 502 llm_error while the LLM fails is its answer, counted apart)")
    return ok


def setup_agent(base: str) -> tuple[str, dict]:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=base, headers=admin, timeout=60) as api:
        made = api.post("/v1/agents", json={"name": "soak", "config": {"limit": 3}})
        made.raise_for_status()
        key = api.post("/api/keys", json={"name": "soak", "agents": [made.json()["id"]], "rate_limit_per_min": 10_000})
        key.raise_for_status()
    return f"/v1/agents/{made.json()['id']}/versions/latest/invoke", {"Authorization": f"Bearer {key.json()['key']}"}


def run(args: argparse.Namespace) -> bool:
    parent, child = multiprocessing.Pipe()
    fakes_process = multiprocessing.get_context("spawn").Process(target=serve_fakes, args=(child,), daemon=True)
    fakes_process.start()
    urls = parent.recv()
    workdir = Path(tempfile.mkdtemp(prefix="soak-"))
    redis_port, gateway_port = free_port(), free_port()
    agent = "soak" + uuid.uuid4().hex[:6]
    env = {**gateway_env(agent, f"redis://127.0.0.1:{redis_port}/0", urls["llm"], urls),
           "SWITCHBOARD_ADMIN_TOKEN": ADMIN_TOKEN, "SWITCHBOARD_INBOX_RECLAIM_S": str(args.reclaim_s),
           "SWITCHBOARD_INBOX_STUCK_WARN_S": "30",  # a turn that stalls says where, in stack.log
           "SWITCHBOARD_DATA_DIR": str(workdir / "gateway"), "SWITCHBOARD_TRUSTED_PROXIES": "127.0.0.1",
           # The fake LLM echoes; conversation-meta extraction wants schema JSON and would only fail
           # (a traceback per conversation): it runs a day after a turn, so not during the soak.
           "SWITCHBOARD_CONVERSATION_META_DELAY_S": "86400"}
    stack = Stack(env, workdir, redis_port, gateway_port, args.turn_workers)
    ok = False
    try:
        stack.start()
        base = f"http://127.0.0.1:{gateway_port}"
        soak = Soak(base, *setup_agent(base))
        seconds = args.minutes * 60

        async def both() -> None:
            await asyncio.gather(soak.traffic(seconds, args.rate),
                                 chaos(soak, stack, parent, seconds, args.chaos_every))

        asyncio.run(both())
        ok = report(soak, drain(soak, parent, args.drain_s), args)
    finally:
        stack.stop()
        parent.send("stop")
        fakes_process.join(20)
        if os.environ.get("SOAK_KEEP") or not ok:
            print("logs kept in", workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--rate", type=float, default=4, help="requests a second, on average (Poisson)")
    parser.add_argument("--turn-workers", type=int, default=2)
    parser.add_argument("--chaos-every", type=float, default=20, help="seconds between chaos events")
    parser.add_argument("--reclaim-s", type=float, default=10, help="SWITCHBOARD_INBOX_RECLAIM_S")
    parser.add_argument("--drain-s", type=float, default=120, help="how long to wait for the last replies")
    sys.exit(0 if run(parser.parse_args()) else 1)


if __name__ == "__main__":
    main()

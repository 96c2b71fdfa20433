"""Webhook ack latency with a slow LLM, and duplicate replies after vendor redeliveries.

A gateway subprocess (uvicorn, every channel configured) talks to a fake LLM that takes 2 s per
reply and to fake Telegram / Slack / Twilio APIs (tests/fakes, recording every send, in a process
of their own so they do not share the load generator's GIL). aiohttp sends signed deliveries at
concurrency 50 — each from a different user, so turns run in parallel — and times each ack; then
20% of the deliveries are replayed as the vendors retry them. A warm-up opens the connections first
(a vendor keeps a pool open to a live gateway) and is reported on its own line. After every turn
has finished, any user with more than one reply is a duplicate.
Targets: ack p99 <= 50 ms, 0 duplicates. Redis at 127.0.0.1:6379 (or BENCH_REDIS_URL).

Two topologies: ``--turn-workers 0`` runs the turn consumers inside the gateway process (the
default); ``--turn-workers N`` runs the gateway with SWITCHBOARD_INBOX_CONSUMER=false and
N ``switchboard worker`` processes consuming the inbox (the production split).

Run: .venv/bin/python bench/webhook_ack.py [--per-channel 300] [--concurrency 50] [--turn-workers 1]
(BENCH_TRACE=1 also prints each ack's start offset and latency, to see when slow acks happen.)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

import aiohttp
import redis
from slack_sdk.signature import SignatureVerifier
from twilio.request_validator import RequestValidator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import free_port, wait_http  # noqa: E402
from tests.fakes import slack_api, telegram_api, twilio_api  # noqa: E402
from tests.fakes.live_server import LiveServer  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402

PUBLIC_URL = "https://bench.example.com"
TG_SECRET = "bench-telegram-secret"
SLACK_SECRET = "bench-slack-signing-secret"






# -- signed deliveries, one user each ----------------------------------------------------------
def telegram_delivery(i: int) -> tuple[str, bytes, dict]:
    user = 10_000_000 + i
    update = {"update_id": 500_000 + i, "message": {
        "message_id": i + 1, "date": int(time.time()), "text": f"question {i}",
        "chat": {"id": user, "type": "private", "first_name": "Bench"},
        "from": {"id": user, "is_bot": False, "first_name": "Bench"}}}
    headers = {"Content-Type": "application/json", "X-Telegram-Bot-Api-Secret-Token": TG_SECRET}
    return "/channels/telegram/webhook", json.dumps(update).encode(), headers


def slack_delivery(i: int, retry: bool = False) -> tuple[str, bytes, dict]:
    ts = f"{1_700_000_000 + i}.000100"
    event = {"type": "message", "channel_type": "im", "channel": f"D{i:08d}", "user": f"U{i:08d}",
             "text": f"question {i}", "ts": ts, "event_ts": ts, "team": slack_api.TEAM_ID}
    body = json.dumps({"token": "x", "team_id": slack_api.TEAM_ID, "api_app_id": "A1", "event": event,
                       "type": "event_callback", "event_id": f"Ev{i:08d}", "event_time": int(time.time())})
    stamp = str(int(time.time()))
    headers = {"Content-Type": "application/json", "X-Slack-Request-Timestamp": stamp,
               "X-Slack-Signature": SignatureVerifier(SLACK_SECRET).generate_signature(timestamp=stamp, body=body)}
    if retry:
        headers["X-Slack-Retry-Num"] = "1"
    return "/channels/slack/events", body.encode(), headers


def sms_delivery(i: int) -> tuple[str, bytes, dict]:
    path = "/channels/twilio/sms"
    params = {"MessageSid": f"SM{i:032d}", "AccountSid": twilio_api.ACCOUNT_SID, "From": f"+1555{i:07d}",
              "To": twilio_api.FROM_NUMBER, "Body": f"question {i}", "NumMedia": "0", "ApiVersion": "2010-04-01"}
    signature = RequestValidator(twilio_api.AUTH_TOKEN).compute_signature(PUBLIC_URL + path, params)
    headers = {"Content-Type": "application/x-www-form-urlencoded", "X-Twilio-Signature": signature}
    return path, urllib.parse.urlencode(params).encode(), headers


BUILDERS = {"telegram": telegram_delivery, "slack": slack_delivery, "twilio_sms": sms_delivery}


async def fire(session: aiohttp.ClientSession, base: str, jobs: list[tuple[str, int, bool]], concurrency: int,
               ) -> dict[str, list[float]]:
    gate = asyncio.Semaphore(concurrency)
    latencies: dict[str, list[float]] = {name: [] for name in BUILDERS}
    failures = Counter()

    async def one(channel: str, path: str, body: bytes, headers: dict) -> None:
        async with gate:
            t0 = time.perf_counter()
            async with session.post(base + path, data=body, headers=headers) as resp:
                await resp.read()
                elapsed = time.perf_counter() - t0
            if resp.status != 200:
                failures[(channel, resp.status)] += 1
            latencies[channel].append(elapsed * 1000)
            if os.environ.get("BENCH_TRACE"):
                print(f"TRACE {channel} start={t0 - began:.3f} ms={elapsed * 1000:.1f}")

    # Sign every delivery first: signing inside the timed loop would bill the load generator's own
    # CPU time to the gateway's acks.
    signed = [(c, *(BUILDERS[c](i, r) if c == "slack" else BUILDERS[c](i))) for c, i, r in jobs]
    # The load generator's own garbage collection would stall every request in flight; keep it out.
    gc.collect()
    gc.freeze()
    began = time.perf_counter()
    await asyncio.gather(*(one(*delivery) for delivery in signed))
    if failures:
        print("non-200 acks:", dict(failures))
    return latencies


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def warm_count(args: argparse.Namespace) -> int:
    return args.concurrency // len(BUILDERS) + 1


async def load(base: str, args: argparse.Namespace) -> tuple[dict, dict, int, dict]:
    """Fire every delivery, then replay 20% of them as vendor retries; returns both latency sets."""
    jobs = [(c, i, False) for i in range(args.per_channel) for c in BUILDERS]
    random.Random(1).shuffle(jobs)
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        # Warm-up, reported apart: it opens the `concurrency` connections a vendor keeps to a live
        # gateway (Telegram keeps up to 40 open) and pays for lazy clients (getMe, auth.test).
        cold = await fire(session, base, [(c, 10_000 + k, False) for k in range(warm_count(args)) for c in BUILDERS],
                          args.concurrency)
        first = await fire(session, base, jobs, args.concurrency)
        replays = random.Random(2).sample(jobs, k=len(jobs) // 5)
        await asyncio.sleep(0.5)
        replayed = await fire(session, base, [(c, i, True) for c, i, _ in replays], args.concurrency)
    return first, replayed, len(replays), cold


def start_fakes(conn, llm: FakeOpenAI) -> tuple[list[LiveServer], dict]:
    """Start the fake LLM and the fake vendor APIs; their URLs go back over ``conn``."""
    fakes = {"telegram": telegram_api.FakeTelegram(), "slack": slack_api.FakeSlack(),
             "twilio_sms": twilio_api.FakeTwilio()}
    servers = [LiveServer(llm.app()).start()] + [LiveServer(f.app()).start() for f in fakes.values()]
    for fake, server in zip(fakes.values(), servers[1:], strict=True):
        fake.url = server.url
    conn.send({"llm": servers[0].url + "/v1", **{name: fake.url for name, fake in fakes.items()}})
    return servers, fakes


def serve_fakes(conn) -> None:
    """The fake LLM and vendor APIs, in a process of their own: in the load generator's process their
    threads would compete with it for the GIL and inflate every ack time it measures."""
    servers, fakes = start_fakes(conn, FakeOpenAI(default_delay_s=2.0))
    while (command := conn.recv()) != "stop":
        if command == "progress":
            conn.send({c: len(fakes[c].sent_texts()) for c in BUILDERS})
        elif command == "recipients":
            conn.send({c: Counter(_recipient(c, call) for call in fakes[c].recorder.received(_method(c)))
                       for c in BUILDERS})
    for server in servers:
        server.stop()


def gateway_env(agent: str, redis_url: str, llm_url: str, fakes: dict) -> dict[str, str]:
    return {**os.environ, "SWITCHBOARD_AGENT_ID": agent, "SWITCHBOARD_REDIS_URL": redis_url,
            "SWITCHBOARD_QDRANT_URL": ":memory:", "SWITCHBOARD_EMBEDDINGS": "none",
            "SWITCHBOARD_LLM_BASE_URL": llm_url, "SWITCHBOARD_LLM_API_KEY": "sk-bench",
            "SWITCHBOARD_PUBLIC_URL": PUBLIC_URL, "SWITCHBOARD_LOG_LEVEL": "WARNING",
            "SWITCHBOARD_TELEGRAM_BOT_TOKEN": telegram_api.TOKEN, "SWITCHBOARD_TELEGRAM_WEBHOOK_SECRET": TG_SECRET,
            "SWITCHBOARD_TELEGRAM_API_BASE": fakes["telegram"],
            "SWITCHBOARD_SLACK_BOT_TOKEN": slack_api.TOKEN, "SWITCHBOARD_SLACK_SIGNING_SECRET": SLACK_SECRET,
            "SWITCHBOARD_SLACK_API_BASE": fakes["slack"] + "/api/",
            "SWITCHBOARD_TWILIO_ACCOUNT_SID": twilio_api.ACCOUNT_SID,
            "SWITCHBOARD_TWILIO_AUTH_TOKEN": twilio_api.AUTH_TOKEN,
            "SWITCHBOARD_TWILIO_API_BASE": fakes["twilio_sms"],
            "SWITCHBOARD_TWILIO_FROM_NUMBER": twilio_api.FROM_NUMBER,
            "SWITCHBOARD_DATA_DIR": f"/tmp/{agent}"}


def report(args: argparse.Namespace, recipients: dict, first: dict, replayed: dict, replays: int) -> None:
    turns = f"{args.turn_workers} `switchboard worker` process(es)" if args.turn_workers else "the gateway"
    print(f"deliveries: {args.per_channel} per channel + {replays} replays, concurrency {args.concurrency}, "
          f"{args.workers} gateway process(es), turns run in {turns}, LLM 2 s")
    print(f"{'channel':<11} {'acks':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'replies':>8} {'dups':>5}")
    total_dups = 0
    for c in BUILDERS:
        lat = first[c] + replayed[c]
        per_user = recipients[c]
        dups = sum(k - 1 for k in per_user.values() if k > 1)
        total_dups += dups
        print(f"{c:<11} {len(lat):>5} {statistics.median(lat):>8.1f} {pct(lat, 0.99):>8.1f} "
              f"{max(lat):>8.1f} {sum(per_user.values()):>8} {dups:>5}")
    everything = [x for c in BUILDERS for x in first[c] + replayed[c]]
    print(f"{'all':<11} {len(everything):>5} {statistics.median(everything):>8.1f} "
          f"{pct(everything, 0.99):>8.1f} {max(everything):>8.1f} {'':>8} {total_dups:>5}")
    print(f"target: ack p99 <= 50 ms -> {'PASS' if pct(everything, 0.99) <= 50 else 'FAIL'}; "
          f"0 duplicates -> {'PASS' if total_dups == 0 else 'FAIL'}")


def run(args: argparse.Namespace) -> None:
    parent, child = multiprocessing.Pipe()
    fakes_process = multiprocessing.get_context("spawn").Process(target=serve_fakes, args=(child,), daemon=True)
    fakes_process.start()
    urls = parent.recv()
    agent = "bench" + uuid.uuid4().hex[:8]
    redis_url = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "gateway.http.app:create_app", "--factory", "--host", "127.0.0.1",
               "--port", str(port), "--log-level", "warning", "--no-access-log", "--workers", str(args.workers)]
    env = gateway_env(agent, redis_url, urls["llm"], urls)
    if args.turn_workers:
        env["SWITCHBOARD_INBOX_CONSUMER"] = "false"
    gateway = subprocess.Popen(command, cwd=ROOT, env=env)
    workers = [subprocess.Popen([sys.executable, "-m", "gateway", "worker"], cwd=ROOT,
                                env={**env, "SWITCHBOARD_DATA_DIR": f"/tmp/{agent}-w{k}"})
               for k in range(args.turn_workers)]
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/healthz")
        first, replayed, replays, cold = asyncio.run(load(base, args))
        expected = args.per_channel + warm_count(args)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            parent.send("progress")
            if all(sent >= expected for sent in parent.recv().values()):
                break
            time.sleep(0.25)
        time.sleep(3.0)  # a duplicate turn would still be 2 s behind its original
        parent.send("recipients")
        report(args, parent.recv(), first, replayed, replays)
        opening = [x for c in BUILDERS for x in cold[c]]
        print(f"warm-up on new connections ({len(opening)} acks): p50 {statistics.median(opening):.1f} ms, "
              f"p99 {pct(opening, 0.99):.1f} ms, max {max(opening):.1f} ms (not in the numbers above)")
    finally:
        for proc in (gateway, *workers):
            proc.terminate()
        for proc in (gateway, *workers):
            proc.wait(30)
        parent.send("stop")
        fakes_process.join(20)
        client = redis.Redis.from_url(redis_url)
        for pattern in (f"sb:{agent}:*", f"rq:*sb:{agent}:*"):
            keys = list(client.scan_iter(match=pattern, count=1000))
            for k in range(0, len(keys), 500):
                client.delete(*keys[k:k + 500])


def _method(channel: str) -> str:
    return {"telegram": "sendMessage", "slack": "chat.postMessage", "twilio_sms": "Messages"}[channel]


def _recipient(channel: str, call) -> str:
    return str(call.params.get({"telegram": "chat_id", "slack": "channel", "twilio_sms": "To"}[channel]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-channel", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes (gateway replicas)")
    parser.add_argument("--turn-workers", type=int, default=0,
                        help="`switchboard worker` processes running the turns (0: the gateway runs them)")
    run(parser.parse_args())


if __name__ == "__main__":
    main()

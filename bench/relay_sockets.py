"""Idle ConversationRelay sockets against the relay's limits: 500 sockets opened as Twilio opens them.

A gateway (``switchboard serve``, relay mode, no embeddings) gets 500 calls from 250 numbers (two each):
first each call's signed incoming-call webhook, then all 500 sockets at once on the ticket URLs they
answered, signed over the full URL. Every socket sends ``setup`` and then nothing. With
``SWITCHBOARD_TWILIO_RELAY_MAX_SOCKETS`` at 300, the sockets past it are closed at once (1013); the rest
are closed by the idle limit (``..._IDLE_TIMEOUT_S`` 5 s here, 1000). Eight rounds; each prints the close
codes, how long the idle sockets stayed open and the gateway's RSS before, at the peak and after; then
the RSS after each round and what the rounds after the first (its warm-up) added. Then one more call is
answered, to show the gateway still takes calls.

    .venv/bin/python bench/relay_sockets.py
"""

from __future__ import annotations

import asyncio
import collections
import html
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import websockets
from twilio.request_validator import RequestValidator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import free_port, wait_http  # noqa: E402

TOKEN = "bench-auth-token"
SID = "AC" + "0" * 32
SOCKETS, NUMBERS, CAP, IDLE_S, ROUNDS = 500, 250, 300, 5.0, 8


async def _relay_url(client: httpx.AsyncClient, public: str, call_sid: str, caller: str) -> str:
    params = {"CallSid": call_sid, "From": caller, "To": "+15550000000", "AccountSid": SID, "CallStatus": "ringing"}
    signature = RequestValidator(TOKEN).compute_signature(f"{public}/channels/twilio/voice", params)
    for attempt in range(3):  # a kept-alive connection the server closed meanwhile: Twilio retries too
        try:
            answer = await client.post("/channels/twilio/voice", data=params,
                                       headers={"X-Twilio-Signature": signature})
            break
        except httpx.TransportError:
            if attempt == 2:
                raise
    found = re.search(r'<ConversationRelay [^>]*\burl="([^"]+)"', answer.text)
    assert found, answer.text
    return html.unescape(found.group(1))


def _call(round_: int, n: int) -> tuple[str, str]:
    return f"CA{round_:04d}{n:028d}", f"+1555{n % NUMBERS:07d}"


async def _idle_socket(public: str, url: str, call_sid: str, caller: str) -> tuple[int, float]:
    """(close code, seconds the socket stayed open) of one call that says nothing after ``setup``."""
    signature = RequestValidator(TOKEN).compute_signature(url, {})
    local = public.replace("http://", "ws://") + url[url.index("/channels/twilio/relay"):]
    # 500 handshakes at once on a shared machine: more than websockets' 10 s default may pass
    async with websockets.connect(local, additional_headers={"X-Twilio-Signature": signature}, open_timeout=60) as ws:
        started = time.monotonic()
        try:
            await ws.send(json.dumps({"type": "setup", "callSid": call_sid, "from": caller}))
            while True:
                await ws.recv()
        except websockets.ConnectionClosed as closed:
            return (closed.rcvd.code if closed.rcvd else 1006), time.monotonic() - started


async def _answered_call(client: httpx.AsyncClient, public: str) -> str:
    call_sid, caller = "CA" + "9" * 32, "+15559999999"
    url = await _relay_url(client, public, call_sid, caller)
    signature = RequestValidator(TOKEN).compute_signature(url, {})
    local = public.replace("http://", "ws://") + url[url.index("/channels/twilio/relay"):]
    async with websockets.connect(local, additional_headers={"X-Twilio-Signature": signature}) as ws:
        await ws.send(json.dumps({"type": "setup", "callSid": call_sid, "from": caller}))
        await ws.send(json.dumps({"type": "prompt", "voicePrompt": "Are you there?", "last": True}))
        spoken = ""
        while True:
            message = json.loads(await ws.recv())
            spoken += message.get("token", "")
            if message.get("last"):
                return spoken.strip()


async def _round(client: httpx.AsyncClient, public: str, process: psutil.Process, round_: int) -> tuple[int, int]:
    """(RSS before the round's sockets, 3 s after the last one closed)."""
    calls = [_call(round_, n) for n in range(SOCKETS)]
    urls = await asyncio.gather(*(_relay_url(client, public, sid, caller) for sid, caller in calls))
    rss0 = peak = process.memory_info().rss
    t0 = time.monotonic()
    sockets = [asyncio.ensure_future(_idle_socket(public, url, *call)) for url, call in zip(urls, calls, strict=True)]
    while not all(s.done() for s in sockets):
        peak = max(peak, process.memory_info().rss)
        await asyncio.sleep(0.2)
    results = [s.result() for s in sockets]
    total_s = time.monotonic() - t0
    await asyncio.sleep(3)
    rss1 = process.memory_info().rss
    codes = collections.Counter(code for code, _ in results)
    idle = [s for code, s in results if code == 1000] or [0.0]
    print(f"round {round_}: {SOCKETS} idle relay sockets opened at once ({NUMBERS} numbers, 2 calls each), cap "
          f"{CAP}, idle limit {IDLE_S:g} s: closes by code {dict(sorted(codes.items()))}; idle ones open "
          f"{min(idle):.1f}-{max(idle):.1f} s; all closed after {total_s:.1f} s; gateway RSS before the sockets "
          f"{rss0 / 2**20:.0f} MiB, peak {peak / 2**20:.0f} MiB, 3 s after the last close {rss1 / 2**20:.0f} MiB")
    return rss0, rss1


async def _run(public: str, process: psutil.Process) -> None:
    async with httpx.AsyncClient(base_url=public, timeout=60, limits=httpx.Limits(max_connections=50)) as client:
        # the later rounds show whether what the first left behind grows
        rss = [await _round(client, public, process, round_) for round_ in range(1, ROUNDS + 1)]
        baseline, after = rss[0][0], [rss1 for _, rss1 in rss]
        mib = [f"{rss / 2**20:.0f}" for rss in after]
        print(f"gateway RSS: {baseline / 2**20:.0f} MiB before the first sockets; after each round {', '.join(mib)} "
              f"MiB; rounds 2-{ROUNDS} added {(after[-1] - after[0]) / 2**20:+.1f} MiB in all "
              f"({(after[-1] - after[0]) / (ROUNDS - 1) / 2**20:+.1f} MiB a round after the first's warm-up)")
        print(f"a call after them answered: {await _answered_call(client, public)!r}")


def main() -> None:
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data:
        env = {**os.environ, "SWITCHBOARD_DATA_DIR": data, "SWITCHBOARD_PUBLIC_URL": public,
               "SWITCHBOARD_TWILIO_ACCOUNT_SID": SID, "SWITCHBOARD_TWILIO_AUTH_TOKEN": TOKEN,
               "SWITCHBOARD_TWILIO_FROM_NUMBER": "+15550000000", "SWITCHBOARD_TWILIO_VOICE_MODE": "relay",
               "SWITCHBOARD_TWILIO_RELAY_MAX_SOCKETS": str(CAP), "SWITCHBOARD_TWILIO_RELAY_IDLE_TIMEOUT_S": str(IDLE_S),
               "SWITCHBOARD_TWILIO_RELAY_TICKET_TTL_S": "600",  # the bench asks for all 500 URLs before opening
               "SWITCHBOARD_REDIS_SOCKET_TIMEOUT_S": "30",  # 500 upgrades at once on a shared 2-core machine
               "SWITCHBOARD_EMBEDDINGS": "none", "SWITCHBOARD_LOG_LEVEL": "ERROR", "SWITCHBOARD_ENV_FILE": ""}
        server = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--port", str(port)], env=env, cwd=data,
                                  stdout=subprocess.DEVNULL)
        try:
            wait_http(public + "/healthz")
            time.sleep(2)
            asyncio.run(_run(public, psutil.Process(server.pid)))
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()

"""Time to first speech on a phone call: the ConversationRelay socket against the Gather loop.

A gateway (``switchboard serve --demo``, embeddings on with the local model when present) answers calls
whose model streams like a real one: its first delta after 300 ms, then a few characters every 30 ms
(about 2 s for the whole answer). Fake ConversationRelay clients (signed WebSockets, each on the URL with
its call's ticket that a signed incoming-call webhook answered, untimed) ask the demo a
question, 1 and then 20 calls at once, five rounds of each; the same question goes through the Gather path
(a signed POST of the speech result, timed until its TwiML answer). Each relay call sends its prompt 1 s
after ``setup``, as a real call's first prompt follows the welcome greeting Twilio speaks first. The 20
calls' prompts come in the same millisecond (the worst case: every turn's work before the model queues
on one event loop), then, as concurrent callers speak, at random moments over a second.
Retrieval is ``hybrid`` (no LLM selection call), otherwise the shipped defaults; the model answers the
calls' conversation-meta extractions (20 s after each call's turn) with valid JSON.

    .venv/bin/python bench/voice_relay.py
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import httpx
import psutil
import websockets
from twilio.request_validator import RequestValidator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import free_port, wait_http  # noqa: E402
from tests.fakes.live_server import LiveServer  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402

TOKEN = "bench-auth-token"
SID = "AC" + "0" * 32
FIRST_DELTA_S = 0.3
CHUNK_S = 0.03
CHUNK_CHARS = 6
QUESTION = "Do you offer guided tours?"
GREETING_S = 1.0  # setup -> the first final prompt: the greeting is spoken, then the caller speaks
ROUNDS = 5  # of 20 calls at once: p99 over 100 first tokens, not the largest of 20
SPREAD_S = 1.0  # the second 20-call scenario: each call's prompt at a random moment within this window
MODEL = Path(os.environ.get("SWITCHBOARD_EMBEDDING_MODEL_PATH", ROOT.parent / "shared/models/all-MiniLM-L6-v2"))


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def _relay_url(base: str, public: str, call_sid: str, caller: str) -> str:
    """Twilio's signed incoming-call webhook: the ``<ConversationRelay url>`` (with the call's ticket) it answers."""
    params = {"CallSid": call_sid, "From": caller, "To": "+15550000000", "AccountSid": SID, "CallStatus": "ringing"}
    signature = RequestValidator(TOKEN).compute_signature(f"{public}/channels/twilio/voice", params)
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        answer = await client.post("/channels/twilio/voice", data=params, headers={"X-Twilio-Signature": signature})
    found = re.search(r'<ConversationRelay url="([^"]+)"', answer.text)
    assert found, answer.text
    return html.unescape(found.group(1))


async def _relay_call(base_ws: str, public: str, n: int, pause_s: float) -> tuple[float, float]:
    call_sid, caller = f"CA{n:032d}", f"+1555{n:07d}"
    url = await _relay_url(base_ws.replace("ws://", "http://"), public, call_sid, caller)
    signature = RequestValidator(TOKEN).compute_signature(url, {})
    local = base_ws + url[url.index("/channels/twilio/relay"):]
    async with websockets.connect(local, additional_headers={"X-Twilio-Signature": signature}) as ws:
        await ws.send(json.dumps({"type": "setup", "callSid": call_sid, "from": caller}))
        await asyncio.sleep(pause_s)  # Twilio speaks the welcome greeting; the caller's words come after it
        sent = time.perf_counter()
        await ws.send(json.dumps({"type": "prompt", "voicePrompt": QUESTION, "last": True}))
        first = None
        while True:
            message = json.loads(await ws.recv())
            if message.get("type") == "text":
                first = first or time.perf_counter()
                if message.get("last"):
                    return first - sent, time.perf_counter() - sent


async def _gather_call(client: httpx.AsyncClient, public: str, n: int) -> float:
    path = "/channels/twilio/voice/turn?" + urlencode({"n": 1})
    params = {"CallSid": f"CB{n:032d}", "From": f"+1666{n:07d}", "To": "+15550000000", "AccountSid": SID,
              "CallStatus": "in-progress", "SpeechResult": QUESTION}
    sent = time.perf_counter()
    while True:  # a filler and a <Redirect> until the reply is ready: the caller hears the reply at the end
        signature = RequestValidator(TOKEN).compute_signature(public + path, params)
        answer = await client.post(path, data=params, headers={"X-Twilio-Signature": signature})
        assert answer.status_code == 200 and "<Say" in answer.text, answer.text
        redirect = re.search(r"<Redirect[^>]*>([^<]+)</Redirect>", answer.text)
        if redirect is None or "<Gather" in answer.text:
            return time.perf_counter() - sent
        path = html.unescape(redirect.group(1)).removeprefix(public)


async def _round(base: str, public: str, calls: int, offset: int, spread_s: float) -> dict[str, list[float]]:
    base_ws = base.replace("http://", "ws://")
    pauses = [GREETING_S + random.Random(offset + i).uniform(0, spread_s) for i in range(calls)]
    relay = await asyncio.gather(*(_relay_call(base_ws, public, offset + i, pauses[i]) for i in range(calls)))
    if spread_s:  # the Gather path is timed in the rounds whose prompts come at once
        return {"first": [f - FIRST_DELTA_S for f, _ in relay], "last": [t for _, t in relay], "gather": []}
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        gather = await asyncio.gather(*(_gather_call(client, public, offset + i) for i in range(calls)))
    return {"first": [f - FIRST_DELTA_S for f, _ in relay], "last": [t for _, t in relay], "gather": list(gather)}


def _gateway(env: dict[str, str], port: int, data: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--demo", "--port", str(port)],
                            env=env, cwd=data, stdout=subprocess.DEVNULL)


def _measure(public: str, server: subprocess.Popen, rag_mode: str) -> dict[tuple[int, float], dict[str, list[float]]]:
    """The rounds (1 call; 20 calls prompting at once; 20 calls prompting over ``SPREAD_S``) against one
    gateway; prints a line per scenario."""
    process = psutil.Process(server.pid)
    asyncio.run(_round(public, public, 1, 0, 0.0))  # warm: first turn of each path
    results = {}
    for calls, spread_s, offset in ((1, 0.0, 100), (20, 0.0, 1000), (20, SPREAD_S, 2000)):
        cpu0 = sum(process.cpu_times()[:2])
        rounds = [asyncio.run(_round(public, public, calls, offset + 100 * r, spread_s)) for r in range(ROUNDS)]
        result = results[calls, spread_s] = {k: [v for r in rounds for v in r[k]] for k in ("first", "last", "gather")}
        turns = calls * ROUNDS * (1 if spread_s else 2)
        cpu_ms = (sum(process.cpu_times()[:2]) - cpu0) * 1000 / turns
        first, last, gather = result["first"], result["last"], result["gather"]
        when = f"over {spread_s:.0f} s" if spread_s else "at once"
        line = (f"{rag_mode:>6} {calls:>2} call(s) x {ROUNDS}, prompts {when}: relay first token after the model's "
                f"first delta p50 {statistics.median(first) * 1000:.0f} ms p99 {_p(first, 0.99) * 1000:.0f} ms "
                f"max {max(first) * 1000:.0f} ms; relay last token p50 {statistics.median(last) * 1000:.0f} ms")
        if gather:
            sooner = statistics.median(gather) - statistics.median(first) - FIRST_DELTA_S
            line += (f"; gather answer p50 {statistics.median(gather) * 1000:.0f} ms p99 "
                     f"{_p(gather, 0.99) * 1000:.0f} ms; first speech sooner by {sooner * 1000:.0f} ms")
        print(f"{line}; gateway CPU {cpu_ms:.1f} ms per turn")
    return results


def main() -> None:
    answer = ("Yes, we do. Our guided coastal tour starts every Saturday at 10:30 from the shop, takes about "
              "three hours on easy flat paths, and costs 40 euros with the bike and the guide included. Groups "
              "are limited to ten riders, so please book ahead on our website or in the shop. Helmets are free.")
    meta = json.dumps({"name": None, "contact": None, "intent": "guided tour", "stage": "exploring",
                       "preferences": [], "summary": "The caller asked about guided tours."})
    fake = FakeOpenAI(default_delay_s=FIRST_DELTA_S, chunk_delay_s=CHUNK_S, chunk_chars=CHUNK_CHARS,
                      default_reply=answer, paced_whole=True, structured_reply=meta)  # the calls' meta extraction
    model_s = FIRST_DELTA_S + len(answer) / CHUNK_CHARS * CHUNK_S
    print(f"voice relay vs gather: model first delta {FIRST_DELTA_S * 1000:.0f} ms, then {CHUNK_CHARS} "
          f"chars every {CHUNK_S * 1000:.0f} ms ({len(answer)} chars, ~{model_s:.1f} s); embeddings "
          f"{'on' if MODEL.is_dir() else 'off'}, retrieval hybrid, demo knowledge base; the relay's knowledge "
          "context inline (the default) and then queued (SWITCHBOARD_TWILIO_RELAY_RAG_MODE); gather is queued")
    firsts: dict[str, list[float]] = {}
    with LiveServer(fake.app()) as llm:
        for rag_mode in ("inline", "queued"):
            port = free_port()
            public = f"http://127.0.0.1:{port}"
            with tempfile.TemporaryDirectory() as data:
                env = {**os.environ, "SWITCHBOARD_DATA_DIR": data, "SWITCHBOARD_PUBLIC_URL": public,
                       "SWITCHBOARD_LLM_BASE_URL": llm.url + "/v1", "SWITCHBOARD_LLM_API_KEY": "sk-bench",
                       "SWITCHBOARD_TWILIO_ACCOUNT_SID": SID, "SWITCHBOARD_TWILIO_AUTH_TOKEN": TOKEN,
                       "SWITCHBOARD_TWILIO_FROM_NUMBER": "+15550000000", "SWITCHBOARD_TWILIO_VOICE_MODE": "relay",
                       "SWITCHBOARD_TWILIO_RELAY_RAG_MODE": rag_mode,
                       "SWITCHBOARD_RETRIEVAL_STRATEGY": "hybrid", "SWITCHBOARD_LOG_LEVEL": "WARNING",
                       "SWITCHBOARD_WEBCHAT_MESSAGES_PER_ADDRESS": "0", "SWITCHBOARD_ENV_FILE": ""}
                if MODEL.is_dir():
                    env["SWITCHBOARD_EMBEDDING_MODEL_PATH"] = str(MODEL)
                else:
                    env["SWITCHBOARD_EMBEDDINGS"] = "none"
                server = _gateway(env, port, data)
                try:
                    wait_http(public + "/healthz")
                    time.sleep(3)  # the demo knowledge base loads on start
                    results = _measure(public, server, rag_mode)
                    firsts[rag_mode] = [f for r in results.values() for f in r["first"]]
                finally:
                    server.terminate()
                    server.wait(timeout=30)
    inline, queued = (statistics.median(firsts[m]) * 1000 for m in ("inline", "queued"))
    print(f"relay first token, all calls: inline p50 {inline:.0f} ms, queued p50 {queued:.0f} ms "
          f"({'inline' if inline <= queued else 'queued'} is faster by {abs(queued - inline):.0f} ms)")


if __name__ == "__main__":
    main()

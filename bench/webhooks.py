"""Event webhooks benchmark (issue 41's done-when): a receiver that is down for ``--down-s`` (default 60)
then up gets every event once, in order per conversation, each signature valid; and the turns' latency
while it is down, against the same turns with no webhook at all.

The gateway answers in process (uvicorn in a thread) on a Redis of its own, with the fake model server
of ``tests/fakes`` answering "I don't know" (so every turn emits ``conversation.unanswered``) and each
reply rated (``message.feedback``). Phase 1: ``--turns`` turns with no webhook. Phase 2: a webhook to a
port where nothing listens, the same number of turns, then the receiver starts ``--down-s`` after the
webhook was made.

    python bench/webhooks.py [--turns N] [--conversations N] [--down-s S]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from cryptography.fernet import Fernet
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import free_port, wait_port  # noqa: E402
from gateway.core.settings import Settings  # noqa: E402
from gateway.http.app import create_app  # noqa: E402
from gateway.insight.signature import HEADER, verify  # noqa: E402
from tests.fakes.live_server import LiveServer  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402

ADMIN = {"Authorization": "Bearer bench-admin"}
SECRET = "whsec_bench_secret_0123456789"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Receiver:
    def __init__(self) -> None:
        self.received: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            body = await request.body()
            with self.lock:
                self.received.append((request.headers.get(HEADER, ""), body))
            return Response(status_code=204)

        return Starlette(routes=[Route("/hook", hook, methods=["POST"])])


def turns(api: httpx.Client, count: int, conversations: int, expected: dict[str, list[str]]) -> list[float]:
    """``count`` turns over ``conversations`` web chat sessions, each reply rated; the turns' times (ms)."""
    sessions = [api.post("/api/chat/sessions").json() for _ in range(conversations)]
    took = []
    for i in range(count):
        session = sessions[i % conversations]
        auth = {"Authorization": f"Bearer {session['token']}"}
        t0 = time.perf_counter()
        answer = api.post(f"/api/chat/sessions/{session['session_id']}/messages", headers=auth,
                          json={"text": f"question {i}"})
        took.append((time.perf_counter() - t0) * 1000)
        reply = answer.json()["reply"]
        rated = api.post(f"/api/conversations/{reply['conversation_id']}/messages/{reply['message_id']}/feedback",
                         json={"rating": "up"}, headers={**auth, "X-Chat-Session": session["session_id"]})
        if answer.status_code != 200 or rated.status_code != 200:
            raise SystemExit(f"turn {i}: HTTP {answer.status_code} / {rated.status_code}")
        expected.setdefault(reply["conversation_id"], []).extend(
            [f"conversation.unanswered:question {i}", f"message.feedback:{reply['message_id']}"])
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--down-s", type=float, default=60.0)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="sb-bench-webhooks-")
    port = free_port()
    redis_server = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                                     "--dir", data_dir], stdout=subprocess.DEVNULL)
    fake = FakeOpenAI(default_reply="Sorry, I don't know that.")
    try:
        wait_port(port)
        with LiveServer(fake.app()) as llm:
            settings = Settings(
                _env_file=None, agent_id="benchhooks", redis_url=f"redis://127.0.0.1:{port}/0",
                data_dir=Path(data_dir) / "data", qdrant_url=":memory:", embeddings="none",
                admin_token="bench-admin", log_level="WARNING", llm_base_url=llm.url + "/v1", llm_api_key="sk-bench",
                secret_key=SecretStr(Fernet.generate_key().decode()), outbound_allow_hosts="127.0.0.1",
                webhook_backoff_first_s=1.0, webhook_backoff_max_s=10.0, webchat_sessions_per_address=0,
                webchat_messages_per_address=0, webchat_messages_per_session=0)
            with LiveServer(create_app(settings)) as gateway, httpx.Client(base_url=gateway.url, timeout=30) as api:
                expected: dict[str, list[str]] = {}
                quiet = turns(api, args.turns, args.conversations, {})
                receiver, hook_port = Receiver(), free_port()
                hook = api.post("/api/webhooks", headers=ADMIN, json={
                    "url": f"http://127.0.0.1:{hook_port}/hook", "secret": SECRET,
                    "events": ["conversation.unanswered", "message.feedback"]}).json()
                down_since = time.monotonic()
                down = turns(api, args.turns, args.conversations, expected)
                total = sum(len(v) for v in expected.values())
                for name, took in (("no webhook", quiet), ("webhook receiver down", down)):
                    print(f"{name:22s} {len(took)} turns: p50 {statistics.median(took):6.1f} ms  "
                          f"p99 {pct(took, 0.99):6.1f} ms  max {max(took):6.1f} ms")
                time.sleep(max(0.0, args.down_s - (time.monotonic() - down_since)))
                waiting = api.get(f"/api/webhooks/{hook['id']}/deliveries", headers=ADMIN).json()
                failed = sum(a["status"] == "failed" for a in waiting["attempts"])
                print(f"receiver down {time.monotonic() - down_since:.0f} s: {waiting['waiting']} events waiting, "
                      f"{failed} failed attempts in the log")
                up = time.monotonic()
                with LiveServer(receiver.app(), port=hook_port):
                    while len(receiver.received) < total and time.monotonic() - up < 600:
                        time.sleep(0.1)
                    drained = time.monotonic() - up
                    time.sleep(2)  # anything sent twice would have arrived
                events = [(header, json.loads(body)) for header, body in receiver.received]
                ids = {e["id"] for _, e in events}
                signed = sum(verify(SECRET, body, header) for header, body in receiver.received)
                got: dict[str, list[str]] = {}
                for _, e in events:
                    detail = e["data"].get("question") or e["data"].get("message_id")
                    got.setdefault(e["conversation_id"], []).append(f"{e['type']}:{detail}")
                print(f"receiver up: {len(events)} of {total} events in {drained:.1f} s, {len(ids)} distinct, "
                      f"{signed} signatures valid, in order per conversation: {got == expected}")
                return 0 if (len(events) == total == len(ids) == signed and got == expected) else 1
    finally:
        redis_server.terminate()
        redis_server.wait(10)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())

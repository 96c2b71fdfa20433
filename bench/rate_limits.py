"""Rate limits as an attacker meets them, on the shipped defaults: 200 wrong admin tokens from one
address, 200 anonymous web-chat sessions from one address, 200 messages to one session (the model is
the local fake OpenAI server). Prints each burst's answers by status and its wall time; the same
script on a build without rate limits shows every request accepted.

    python bench/rate_limits.py [--count N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.core.settings import Settings  # noqa: E402
from gateway.http.app import create_app  # noqa: E402
from tests.fakes.live_server import LiveServer  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402

REDIS_URL = "redis://127.0.0.1:6379/0"


def burst(label: str, count: int, send) -> None:
    started = time.perf_counter()
    statuses = [send(i) for i in range(count)]
    took = time.perf_counter() - started
    runs: list[list] = []
    for status in statuses:  # "10 × 401 then 190 × 429"
        if runs and runs[-1][0] == status:
            runs[-1][1] += 1
        else:
            runs.append([status, 1])
    shown = " then ".join(f"{n} × {status}" for status, n in runs)
    print(f"{label:<34} {shown:<40} in {took:.2f} s  ({dict(Counter(statuses))})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=200)
    args = parser.parse_args()
    agent = "bench" + uuid.uuid4().hex[:8]
    fake = FakeOpenAI()
    with tempfile.TemporaryDirectory() as data, LiveServer(fake.app(), graceful_timeout_s=1) as llm:
        settings = Settings(_env_file=None, agent_id=agent, redis_url=REDIS_URL, qdrant_url=":memory:",
                            embeddings="none", data_dir=Path(data), llm_base_url=llm.url + "/v1",
                            llm_api_key="sk-bench", admin_token="bench-admin-token")
        with LiveServer(create_app(settings)) as gw, httpx.Client(base_url=gw.url, timeout=30) as client:
            wrong = {"Authorization": "Bearer not-the-token"}
            burst("wrong admin tokens", args.count,
                  lambda i: client.get("/api/attributes", headers=wrong).status_code)
            right = client.get("/api/attributes", headers={"Authorization": "Bearer bench-admin-token"})
            print(f"{'then the right admin token':<34} {right.status_code} (Retry-After: "
                  f"{right.headers.get('retry-after', '-')})")
            body = client.post("/api/chat/sessions").json()  # the session the message burst uses
            burst("anonymous web-chat sessions", args.count,
                  lambda i: client.post("/api/chat/sessions").status_code)
            auth = {"Authorization": f"Bearer {body['token']}"}
            url = f"/api/chat/sessions/{body['session_id']}/messages"
            burst("messages to one session", args.count,
                  lambda i: client.post(url, json={"text": f"hello {i}"}, headers=auth).status_code)
    r = redis.Redis.from_url(REDIS_URL)
    for key in r.scan_iter(match=f"sb:{agent}:*", count=1000):
        r.delete(key)
    r.close()


if __name__ == "__main__":
    main()

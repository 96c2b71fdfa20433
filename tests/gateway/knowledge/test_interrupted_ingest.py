"""A gateway killed in the middle of an ingest: after the restart the document and its job say they
were interrupted (failed, with the reason) instead of staying ``processing`` / ``running`` forever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import psutil
import pytest

from gateway.http.app import create_app
from tests.conftest import make_settings
from tests.fakes.live_server import LiveServer, free_port

ADMIN = {"Authorization": "Bearer admin-secret"}


def _serve(tmp_path, port: int, **settings: str) -> subprocess.Popen:
    env = {**os.environ, "SWITCHBOARD_DATA_DIR": str(tmp_path / "data"), "SWITCHBOARD_EMBEDDINGS": "none",
           "SWITCHBOARD_ADMIN_TOKEN": "admin-secret", "SWITCHBOARD_LOG_LEVEL": "WARNING", **settings}
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--port", str(port)], env=env,
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    _until(lambda: httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200, 60, "the gateway to start")
    return proc


def _until(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(10)


def _upload_in_background(url: str, data: bytes, name: str = "big.txt") -> None:
    def send() -> None:
        try:
            httpx.post(f"{url}/api/kb/documents", files={"file": (name, data)}, headers=ADMIN, timeout=120)
        except httpx.HTTPError:
            pass  # the gateway is killed under it

    threading.Thread(target=send, daemon=True).start()


def test_a_killed_ingest_is_failed_with_the_reason_after_the_restart(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = _serve(tmp_path, port)
    try:
        words = " ".join(f"word{i % 5000}" for i in range(1000))
        _upload_in_background(url, "\n\n".join(f"Paragraph {i}. {words}." for i in range(1500)).encode())
        _until(lambda: [d for d in httpx.get(f"{url}/api/kb/documents", headers=ADMIN).json()["documents"]
                        if d["status"] == "processing"], 30, "the document to be processing")
    finally:
        _kill(proc)
    restarted = make_settings(data_dir=tmp_path / "data", redis_url=None, qdrant_url=None, admin_token="admin-secret")
    with LiveServer(create_app(restarted)) as server:  # the same data: embedded Redis, local-mode Qdrant
        [doc] = httpx.get(f"{server.url}/api/kb/documents", headers=ADMIN).json()["documents"]
        [job] = httpx.get(f"{server.url}/api/kb/jobs", headers=ADMIN).json()["jobs"]
    assert doc["name"] == "big.txt" and doc["status"] == "failed"
    assert doc["error"].startswith("interrupted: the process ingesting it stopped (a restart?)")
    assert job["kind"] == "documents" and job["status"] == "failed"
    assert job["message"].startswith("interrupted: the process running it stopped (a restart?)")


def _session(pid: int) -> list[int]:
    """Processes still alive in the session the gateway led (its extraction children included)."""
    alive = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == pid and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc.pid)
        except (OSError, psutil.Error):
            pass
    return alive


def test_sigterm_is_not_held_up_by_an_extraction(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = _serve(tmp_path, port, SWITCHBOARD_SHUTDOWN_GRACE_S="1")
    try:
        rows = "name,price,note\n" + "".join(f"item{i},{i},a note on item {i}\n" for i in range(600_000))
        _upload_in_background(url, rows.encode(), "catalogue.csv")  # ~30 MB of rows: seconds of extraction
        _until(lambda: [p for p in psutil.Process(proc.pid).children(recursive=True)
                        if p.ppid() != proc.pid], 30, "the extraction to start")
        asked = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
        stopped_after = time.monotonic() - asked
        _until(lambda: not _session(proc.pid), 5, "the extraction to stop with the gateway")
    finally:
        _kill(proc)
    assert stopped_after < 6  # the grace of 1 s, then the upload is cancelled and its child killed

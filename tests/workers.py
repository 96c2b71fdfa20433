"""`switchboard worker` subprocesses for tests, each in a session of its own so nothing outlives a test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys


def start_worker(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gateway", "worker"], env={**os.environ, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def stop_workers(*procs: subprocess.Popen | None) -> None:
    """Stop each worker gracefully, then kill what is left of its session (a safety net: RQ's scheduler
    child stops by itself when its worker dies, see ``gateway.jobs.worker.ParentBoundScheduler``)."""
    for proc in procs:
        if proc is None:
            continue
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:  # still draining a turn: the test is over, kill it
                proc.kill()
                proc.wait(5)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def start_gateway(env: dict[str, str], port: int, *, cwd=None, unset: tuple[str, ...] = ()) -> subprocess.Popen:
    """``switchboard serve`` on ``port`` with ``env`` over this process's environment (less ``unset``), once
    it answers /healthz."""
    import time

    import httpx

    inherited = {k: v for k, v in os.environ.items() if k not in unset}
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--port", str(port)], env={**inherited, **env},
                            cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    raise AssertionError("the gateway subprocess did not start")

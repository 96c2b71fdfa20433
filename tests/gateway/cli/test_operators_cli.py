"""The first hour: a new console has no account; the sign-in page and the log say how to make one,
`switchboard operators create` makes it (an admin), and then it signs in."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import httpx

from gateway.core.command import cli_command
from gateway.http.app import create_app
from tests.admin_ui.conftest import sign_in
from tests.fakes.live_server import LiveServer

HINT = f"{cli_command()} operators create NAME"  # `.venv/bin/switchboard …` after `make run`


def _operators(settings, *args: str, password: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SWITCHBOARD_REDIS_URL": settings.redis_url, "SWITCHBOARD_AGENT_ID": settings.agent_id,
           "SWITCHBOARD_DATA_DIR": str(settings.data_dir), "SWITCHBOARD_EMBEDDINGS": "none"}
    return subprocess.run([sys.executable, "-m", "gateway", "operators", *args, "--password-stdin"], env=env,
                          input=password + "\n", capture_output=True, text=True, timeout=60)


def test_no_account_is_explained_then_the_cli_makes_the_first_admin(settings, caplog):
    with caplog.at_level(logging.WARNING, logger="gateway"), LiveServer(create_app(settings)) as server:
        with httpx.Client(base_url=server.url, timeout=20) as client:
            assert HINT in client.get("/admin/login").text
        assert any(HINT in record.getMessage() for record in caplog.records)

        first = _operators(settings, "create", "alice", password="a long enough secret")
        assert first.returncode == 0 and first.stdout.strip() == "created admin alice", first.stderr
        second = _operators(settings, "create", "bob", password="another long secret")
        assert second.stdout.strip() == "created operator bob", second.stderr

        with httpx.Client(base_url=server.url, timeout=20) as client:
            assert HINT not in client.get("/admin/login").text
            signed = sign_in(client, "alice", "a long enough secret")
            assert signed.status_code == 303 and signed.headers["location"] == "/admin"
            assert "Operators" in client.get("/admin/operators").text  # an admin's page


def test_serve_prints_where_the_chat_and_console_are(settings, tmp_path):
    env = {**os.environ, "SWITCHBOARD_REDIS_URL": settings.redis_url, "SWITCHBOARD_AGENT_ID": settings.agent_id,
           "SWITCHBOARD_DATA_DIR": str(tmp_path), "SWITCHBOARD_EMBEDDINGS": "none",
           "SWITCHBOARD_QDRANT_URL": ":memory:"}
    server = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--port", "0"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = server.stdout.readline()
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert "web chat http://127.0.0.1:0/chat" in line and "console http://127.0.0.1:0/admin" in line


def _cli_command(cwd, path: str) -> str:
    code = "from gateway.core.command import cli_command; print(cli_command())"
    env = {**os.environ, "PATH": path}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60, check=True).stdout.strip()


def test_the_hint_names_the_command_as_this_machine_runs_it(tmp_path):
    """After `make run` the command is the venv's (`.venv/bin/switchboard`), not on the shell's PATH: the
    hint says that path; where the PATH finds this installation's command, its bare name."""
    script = Path(sys.prefix) / "bin" / "switchboard"
    assert script.exists(), "the suite runs from an installed checkout"
    without = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != script.parent)
    from_checkout = _cli_command(script.parent.parent.parent, without)
    assert from_checkout == os.path.relpath(script, script.parent.parent.parent)  # `.venv/bin/switchboard`
    assert _cli_command(tmp_path, without) in (str(script), os.path.relpath(script, tmp_path))
    assert _cli_command(tmp_path, f"{script.parent}{os.pathsep}{without}") == "switchboard"

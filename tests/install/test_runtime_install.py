"""The install users do: the built wheel into a new venv with its own pip and runtime dependencies only.

`pip install <checkout>` with the pip that Python ships once crashed at import (an extra name that
pip < 24 did not normalise left lxml_html_clean out), and the console's templates were not package
data. Here the venv resolves the package's own ranges, with that old pip, against a wheelhouse of the
locked versions (downloaded once per lock and reused), then serves the demo from another directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"
MODEL_PATH = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2"
MODEL_CACHE = Path(os.environ.get("TMPDIR", "/tmp")) / "switchboard-test-models"
PACKAGES = ("gateway", "channels", "rag_core", "admin_ui")

IMPORT_EVERY_MODULE = """
import importlib, json, pkgutil, sys
failed, count = [], 0
for top in sys.argv[1:]:
    package = importlib.import_module(top)
    for info in pkgutil.walk_packages(package.__path__, top + "."):
        if info.name.endswith("__main__"):
            continue
        count += 1
        try:
            importlib.import_module(info.name)
        except Exception as exc:
            failed.append(f"{info.name}: {exc!r}")
print(json.dumps({"count": count, "failed": failed, "gateway": importlib.import_module("gateway").__file__}))
"""


def _clean_env(**extra: str) -> dict[str, str]:
    """Nothing of the developer's: no PYTHONPATH, pip configuration, SWITCHBOARD_* or OpenAI settings."""
    keep = {name: os.environ[name] for name in ("PATH", "HOME", "LANG", "TMPDIR") if name in os.environ}
    keep["PIP_CONFIG_FILE"] = os.devnull
    keep["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    keep.update(extra)
    return keep


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    command = " ".join(map(str, cmd))
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    """The locked runtime wheels, fetched once per lock file (pip's cache makes a refetch cheap)."""
    digest = hashlib.sha256(LOCK.read_bytes()).hexdigest()[:16]
    base = Path(os.environ.get("SWITCHBOARD_WHEELHOUSE_DIR", Path.home() / ".cache" / "switchboard" / "wheelhouse"))
    target = base / digest
    if not (target / ".complete").exists():
        target.mkdir(parents=True, exist_ok=True)
        _run([sys.executable, "-m", "pip", "download", "-q", "--require-hashes", "--only-binary=:all:",
              "-r", str(LOCK), "-d", str(target)])
        (target / ".complete").touch()
    return target


@pytest.fixture(scope="module")
def runtime_venv(wheelhouse, tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("install")
    # Built from a copy: setuptools builds in the source tree's build/, which another run may be using.
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".venv", ".git", "data", "build", "site", "*.egg-info", "__pycache__", "tests", "bench", "docs"))
    # No build isolation: the dev lock's setuptools builds it, offline (an isolated build fetches one).
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(source),
          "-w", str(work / "dist")], env=_clean_env())
    (wheel,) = (work / "dist").glob("switchboard_gateway-*.whl")
    venv = work / "venv"
    # The interpreter the project venv was made from: a new venv gets the pip that Python ships.
    _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)])
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--find-links",
          str(wheelhouse), str(wheel)], env=_clean_env())
    return venv


def test_every_module_imports_with_runtime_dependencies_only(runtime_venv, tmp_path):
    result = _run([str(runtime_venv / "bin" / "python"), "-c", IMPORT_EVERY_MODULE, *PACKAGES],
                  cwd=tmp_path, env=_clean_env())
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["failed"] == []
    assert report["count"] > 100
    assert report["gateway"].startswith(str(runtime_venv)), "imported from the checkout, not the install"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_installed_demo_serves_the_chat_and_console_and_answers(runtime_venv, tmp_path):
    port = _free_port()
    embedding = ({"SWITCHBOARD_EMBEDDING_MODEL_PATH": str(MODEL_PATH), "SWITCHBOARD_MODEL_CACHE_DIR": str(MODEL_CACHE)}
                 if MODEL_PATH.is_dir() else {"SWITCHBOARD_EMBEDDINGS": "none"})
    env = _clean_env(SWITCHBOARD_DATA_DIR=str(tmp_path / "data"), **embedding)
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen([str(runtime_venv / "bin" / "switchboard"), "serve", "--demo", "--port", str(port)],
                              cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=30) as client:
            deadline = time.monotonic() + 120
            while True:
                assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "the installed gateway did not come up in 120 s"
                time.sleep(0.3)

            chat = client.get("/chat")
            assert chat.status_code == 200 and "<html" in chat.text.lower() and "widget.js" in chat.text
            widget = client.get("/widget.js")
            assert widget.status_code == 200 and "javascript" in widget.headers["content-type"]
            assert "/api/chat/sessions" in widget.text
            login = client.get("/admin/login")
            assert login.status_code == 200 and 'type="password"' in login.text

            session = client.post("/api/chat/sessions").json()
            answer = client.post(f"/api/chat/sessions/{session['session_id']}/messages",
                                 headers={"Authorization": f"Bearer {session['token']}"},
                                 json={"text": "Do you offer guided tours?"})
            assert answer.status_code == 200, answer.text
            reply = answer.json()["reply"]["text"]
            # The demo knowledge base's answer, not a canned line: the tour's day, time and price.
            assert "Saturday" in reply and "10:30" in reply, reply
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()

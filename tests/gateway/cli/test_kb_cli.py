"""`switchboard kb ...` on its own data, and through a running gateway's admin API."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx

MARKDOWN = "# Opening hours\n\n## Facts\n- open 9 to 5\n\nWe are open from 9 to 5,\nMonday to Friday.\n"


def _kb(settings, *args, public_url="http://127.0.0.1:9"):
    env = {**os.environ, "SWITCHBOARD_REDIS_URL": settings.redis_url, "SWITCHBOARD_AGENT_ID": settings.agent_id,
           "SWITCHBOARD_DATA_DIR": str(settings.data_dir), "SWITCHBOARD_EMBEDDINGS": "none",
           "SWITCHBOARD_PUBLIC_URL": public_url, "SWITCHBOARD_ADMIN_TOKEN": "admin-secret",
           "SWITCHBOARD_LOG_LEVEL": "WARNING"}
    env.pop("SWITCHBOARD_QDRANT_URL", None)
    return subprocess.run([sys.executable, "-m", "gateway", "kb", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_kb_commands_on_local_data(settings, tmp_path):
    md = tmp_path / "handbook.md"
    md.write_text(MARKDOWN)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "x", "title": "X", "body": "fine"}\n{"title": "no source"}\n')
    assert "1 created" in _kb(settings, "import", str(md)).stdout
    failed = _kb(settings, "import", str(bad))
    assert failed.returncode == 1 and "line 2: source" in failed.stderr
    assert sorted(_kb(settings, "list").stdout.splitlines()) == [
        "opening-hours\tOpening hours\trag_context", "x\tX\trag_context"]
    assert _kb(settings, "search", "when are you open", "--strategy", "bm25").stdout.split("\t")[1] == "opening-hours"
    assert _kb(settings, "delete", "x").stdout.strip() == "deleted x"
    assert _kb(settings, "delete", "x").returncode == 1


def test_kb_import_goes_through_a_running_gateway(gateway, settings, tmp_path):
    md = tmp_path / "handbook.md"
    md.write_text(MARKDOWN)
    done = _kb(settings, "import", str(md), public_url=gateway.url)
    assert done.returncode == 0, done.stderr
    topic = httpx.get(f"{gateway.url}/api/kb/topics/opening-hours",
                      headers={"Authorization": "Bearer admin-secret"}).json()
    assert topic["summary"] == "We are open from 9 to 5, Monday to Friday." and topic["facts"] == ["open 9 to 5"]

"""Stdio MCP servers (a local command): added with the CLI only (``switchboard tools add-stdio``), listed by
starting the command (a real FastMCP server over stdio), shown by the API, called in a real web-chat turn
with the idempotency key; the API refuses to add or change one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.gateway.tools.conftest import ADMIN, ask, trace_of
from tests.gateway.tools.test_tool_turns import _give_tools

SERVER = Path(__file__).resolve().parents[2] / "fakes" / "mcp_stdio_server.py"


def _cli(settings, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SWITCHBOARD_REDIS_URL": settings.redis_url, "SWITCHBOARD_AGENT_ID": settings.agent_id,
           "SWITCHBOARD_DATA_DIR": str(settings.data_dir), "SWITCHBOARD_EMBEDDINGS": "none",
           "SWITCHBOARD_LOG_LEVEL": "WARNING"}
    return subprocess.run([sys.executable, "-m", "gateway", "tools", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_local_command_added_with_the_cli_answers_a_turn(client, fake_openai, tool_settings, tmp_path):
    record = tmp_path / "calls.jsonl"
    added = _cli(tool_settings, "add-stdio", "stock", "--", sys.executable, str(SERVER), str(record))
    assert added.returncode == 0, added.stderr
    assert added.stdout.split("\t")[:2] == ["stock", "stdio"] and "stock.count_stock" in added.stdout

    [source] = client.get("/api/tool-sources", headers=ADMIN).json()["tool_sources"]
    assert source["kind"] == "stdio" and source["command"] == [sys.executable, str(SERVER), str(record)]
    assert [t["name"] for t in source["tools"]] == ["stock.count_stock"]
    refused = client.patch(f"/api/tool-sources/{source['id']}", headers=ADMIN,
                           json={"url": "http://127.0.0.1/mcp"})
    assert refused.status_code == 422 and "changed with the CLI only" in refused.json()["message"]

    _give_tools(client, tool_settings.agent_id, "stock.count_stock")
    fake_openai.echo_tool_results = True
    fake_openai.script_tool_calls(("stock__count_stock", {"item": "tandem"}))
    answer = ask(client, "Do you have tandems?")

    assert answer["reply"]["text"] == "From the tools: tandem: 12 in stock"
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert calls == [{"tool": "count_stock", "arguments": {"item": "tandem"},
                      "idempotency_key": f"{answer['turn_id']}:0"}]
    [call] = trace_of(client, answer["turn_id"])["tool_calls"]
    assert call["name"] == "stock.count_stock" and call["result"] == "tandem: 12 in stock"

    assert _cli(tool_settings, "list").stdout.startswith("stock\tstdio\t")
    assert _cli(tool_settings, "remove", "stock").stdout.strip() == "removed stock"
    assert client.get("/api/tool-sources", headers=ADMIN).json()["tool_sources"] == []


def test_a_command_that_is_not_there_is_saved_with_its_error(client, tool_settings):
    added = _cli(tool_settings, "add-stdio", "ghost", "--", "/nonexistent/crm-mcp")
    assert added.returncode == 1
    assert "error: the command '/nonexistent/crm-mcp' was not found on this machine" in added.stdout
    [source] = client.get("/api/tool-sources", headers=ADMIN).json()["tool_sources"]
    assert source["tools"] == [] and "was not found" in source["status"]["last_error"]
    assert _cli(tool_settings, "add-stdio", "ghost", "--", "true").returncode == 2  # the name is taken

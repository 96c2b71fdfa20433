"""A stdio MCP server declared in the settings file (``SWITCHBOARD_TOOL_STDIO_SERVERS``): the gateway adds it at
start (listing the real FastMCP command's tools), the API shows it read-only, and a web-chat turn calls its
tool through the command with the idempotency key."""

from __future__ import annotations

import json
import sys

import pytest

from gateway.core.settings import Settings
from tests.gateway.tools.conftest import ADMIN, ask
from tests.gateway.tools.test_stdio_sources import SERVER
from tests.gateway.tools.test_tool_turns import _give_tools


@pytest.fixture
def tool_overrides(tmp_path) -> dict:
    env = tmp_path / "switchboard.env"
    declared = {"stock": [sys.executable, str(SERVER), str(tmp_path / "calls.jsonl")]}
    env.write_text(f"SWITCHBOARD_TOOL_STDIO_SERVERS={json.dumps(declared)}\n")
    return {"tool_stdio_servers": Settings(_env_file=str(env)).tool_stdio_servers}


def test_a_stdio_server_from_the_settings_file_is_a_read_only_source_whose_tool_a_turn_calls(
        client, fake_openai, tool_settings, tmp_path):
    [source] = client.get("/api/tool-sources", headers=ADMIN).json()["tool_sources"]
    assert source["kind"] == "stdio" and source["name"] == "stock"
    assert source["command"] == tool_settings.tool_stdio_servers["stock"]
    assert [t["name"] for t in source["tools"]] == ["stock.count_stock"] and source["status"]["last_error"] is None
    refused = client.patch(f"/api/tool-sources/{source['id']}", headers=ADMIN, json={"name": "stock2"})
    assert refused.status_code == 422 and "changed with the CLI only" in refused.json()["message"]
    assert client.post("/api/tool-sources", headers=ADMIN, json={
        "kind": "stdio", "name": "evil", "command": ["/bin/sh"]}).status_code == 422

    _give_tools(client, tool_settings.agent_id, "stock.count_stock")
    fake_openai.echo_tool_results = True
    fake_openai.script_tool_calls(("stock__count_stock", {"item": "tandem"}))
    answer = ask(client, "Do you have tandems?")

    assert answer["reply"]["text"] == "From the tools: tandem: 12 in stock"
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert calls == [{"tool": "count_stock", "arguments": {"item": "tandem"},
                      "idempotency_key": f"{answer['turn_id']}:0"}]

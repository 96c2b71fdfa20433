"""A tool that takes a while shows in the web chat: the socket says what the agent is checking while the
call runs, then the answer streams."""

from __future__ import annotations

import json

from websockets.sync.client import connect

from tests.gateway.tools.conftest import ADMIN, add_crm


def test_the_web_chat_shows_which_tool_runs_before_the_answer(client, live, mcp_server, fake_openai, tool_settings):
    add_crm(client, mcp_server.url)
    assert client.patch(f"/v1/agents/{tool_settings.agent_id}", headers=ADMIN,
                        json={"config": {"tools": [{"name": "crm.lookup_order"}]}}).status_code == 200
    mcp_server.hang_s = 1.0
    fake_openai.echo_tool_results = True
    fake_openai.script_tool_calls(("crm__lookup_order", {"order": "4411"}))
    chat = client.post("/api/chat/sessions").json()
    url = f"{live.url.replace('http', 'ws', 1)}/api/chat/sessions/{chat['session_id']}/ws?token={chat['token']}"

    with connect(url) as ws:
        ws.send(json.dumps({"text": "Where is my order 4411?"}))
        frames = []
        while not frames or frames[-1]["type"] not in ("message", "error"):
            frames.append(json.loads(ws.recv(timeout=30)))

    kinds = [f["type"] for f in frames]
    assert frames[0] == {"type": "progress", "tool": "crm.lookup_order", "text": "Checking crm.lookup_order\u2026"}
    assert frames[1] == {"type": "progress", "tool": "crm.lookup_order", "text": None}  # done
    assert kinds.index("delta") > 1 and kinds[-1] == "message"
    assert frames[-1]["reply"]["text"] == "From the tools: Order 4411: shipped."

"""An operator taking the conversation over while a tool runs stops the tool loop: the model is not asked
again, the bot's reply is not sent, the operator answers."""

from __future__ import annotations

import threading
import time

from tests.gateway.tools.conftest import ADMIN, add_crm


def test_a_take_over_while_a_tool_runs_stops_the_loop(client, live, mcp_server, fake_openai, tool_settings):
    add_crm(client, mcp_server.url)
    assert client.patch(f"/v1/agents/{tool_settings.agent_id}", headers=ADMIN,
                        json={"config": {"tools": [{"name": "crm.lookup_order"}]}}).status_code == 200
    mcp_server.hang_s = 2.0
    fake_openai.echo_tool_results = True
    fake_openai.script_tool_calls(("crm__lookup_order", {"order": "4411"}))
    fake_openai.script_tool_calls(("crm__lookup_order", {"order": "4412"}))  # a second round, never asked for
    session = client.post("/api/chat/sessions").json()
    answers = []
    sending = threading.Thread(target=lambda: answers.append(client.post(
        f"/api/chat/sessions/{session['session_id']}/messages", json={"text": "Where is my order 4411?"},
        headers={"Authorization": f"Bearer {session['token']}"})))
    sending.start()
    deadline = time.monotonic() + 20
    while not mcp_server.calls:  # the tool runs (for 2 s)
        assert time.monotonic() < deadline, "the tool was not called"
        time.sleep(0.05)
    [listed] = client.get("/api/conversations", headers=ADMIN).json()["conversations"]
    taken = client.post(f"/api/conversations/{listed['id']}/take-over", headers=ADMIN, json={"operator": "ana"})
    assert taken.status_code == 200, taken.text
    sending.join(30)

    assert len(fake_openai.chat_requests()) == 1  # no round after the call
    assert len(mcp_server.calls) == 1
    detail = client.get(f"/api/conversations/{listed['id']}", headers=ADMIN).json()
    [trace] = detail["traces"]
    assert trace["suppressed"] and "handed off to ana" in trace["suppressed"]
    assert "an operator took the conversation over" in trace["error"]
    assert "agent" not in [m["role"] for m in detail["messages"]]  # nothing from the bot (a system note, yes)
    assert answers and answers[0].status_code == 200

"""The built-in ``handoff`` tool: an agent whose ``config.tools`` names it lets the model ask for a person;
the turn then hands the conversation off exactly as the customer's own request would (the handoff message,
the conversation waiting for an operator, the bot silent until one answers)."""

from __future__ import annotations

import httpx

from tests.gateway.tools.conftest import ADMIN


def _session(client: httpx.Client) -> tuple[str, dict]:
    session = client.post("/api/chat/sessions").json()
    return f"/api/chat/sessions/{session['session_id']}/messages", {"Authorization": f"Bearer {session['token']}"}


def test_the_model_hands_a_web_chat_to_a_person_with_the_handoff_tool(client, fake_openai, tool_settings):
    answer = client.patch(f"/v1/agents/{tool_settings.agent_id}", headers=ADMIN,
                          json={"config": {"tools": [{"name": "handoff"}]}})  # no tool source needed
    assert answer.status_code == 200, answer.text
    fake_openai.script_tool_calls(("handoff", {"reason": "wants to complain to a manager"}))
    path, auth = _session(client)

    first = client.post(path, json={"text": "This is the third time my order is late!"}, headers=auth)

    assert first.status_code == 200, first.text
    assert first.json()["reply"]["text"] == tool_settings.handoff_message
    [asked] = fake_openai.chat_requests()  # the model was not asked again after its call
    assert [t["function"]["name"] for t in asked["body"]["tools"]] == ["handoff"]
    [listed] = client.get("/api/conversations", headers=ADMIN).json()["conversations"]
    detail = client.get(f"/api/conversations/{listed['id']}", headers=ADMIN).json()
    [trace] = detail["traces"]
    assert trace["handoff"] == "the model called the handoff tool: wants to complain to a manager"
    assert [c["name"] for c in trace["tool_calls"]] == ["handoff"]
    assert detail["handoff"]["status"] == "waiting"

    second = client.post(path, json={"text": "hello?"}, headers=auth)  # waiting for a person: the bot is silent

    assert second.status_code == 200, second.text
    assert len(fake_openai.chat_requests()) == 1
    detail = client.get(f"/api/conversations/{listed['id']}", headers=ADMIN).json()
    assert detail["traces"][-1]["suppressed"] or detail["traces"][0]["suppressed"]

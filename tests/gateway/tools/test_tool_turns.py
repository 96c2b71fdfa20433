"""The tool loop in real turns, against a real MCP server (the SDK's FastMCP on 127.0.0.1) and the fake
model: a web-chat question makes the model call ``crm.book_table``; the server gets the arguments once
with the turn's idempotency key; the model's second round reads the result; the reply carries it; the
trace shows the call. A hanging tool still lets the customer have an answer within the deadline."""

from __future__ import annotations

import json
import logging
import time

import httpx
import pytest

from tests.gateway.tools.conftest import ADMIN, TOKEN, add_crm, ask, trace_of


def _give_tools(client: httpx.Client, agent_id: str, *names: str) -> None:
    answer = client.patch(f"/v1/agents/{agent_id}", headers=ADMIN,
                          json={"config": {"tools": [{"name": n} for n in names]}})
    assert answer.status_code == 200, answer.text


def _tool_messages(request: dict) -> list[dict]:
    return [m for m in request["body"]["messages"] if m["role"] == "tool"]


def test_a_web_chat_question_books_a_table_through_the_mcp_server(client, mcp_server, fake_openai, tool_settings,
                                                                    caplog):
    caplog.set_level(logging.DEBUG)
    add_crm(client, mcp_server.url)
    _give_tools(client, tool_settings.agent_id, "crm.book_table")
    fake_openai.echo_tool_results = True
    fake_openai.script_tool_calls(("crm__book_table", {"party_size": 4, "day": "Friday"}))

    answer = ask(client, "Book a table for four on Friday, please")

    assert mcp_server.calls == [{"tool": "book_table", "arguments": {"party_size": 4, "day": "Friday"},
                                 "idempotency_key": f"{answer['turn_id']}:0", "authorization": f"Bearer {TOKEN}"}]
    first, second = fake_openai.chat_requests()
    offered = [t["function"]["name"] for t in first["body"]["tools"]]
    assert offered == ["crm__book_table"]
    assert set(first["body"]["tools"][0]["function"]["parameters"]["properties"]) == {"party_size", "day"}
    [result] = _tool_messages(second)
    assert result["content"] == "Booked: a table for 4 on Friday, reference BK-1001."
    assert answer["reply"]["text"] == "From the tools: Booked: a table for 4 on Friday, reference BK-1001."
    [call] = trace_of(client, answer["turn_id"])["tool_calls"]
    assert call["name"] == "crm.book_table" and call["arguments"] == {"party_size": 4, "day": "Friday"}
    assert call["result"] == "Booked: a table for 4 on Friday, reference BK-1001."
    assert call["error"] is None and call["reused"] is False and call["ms"] > 0
    logs = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "crm__book_table" in logs or "book_table" in logs  # the calls were logged at debug level
    assert TOKEN not in logs  # the source's bearer token never was


@pytest.mark.parametrize("tool_overrides", [{"turn_deadline_s": 4.0}])  # less than the tool timeout (10 s)
def test_parallel_calls_a_hanging_tool_and_a_long_answer(client, mcp_server, fake_openai, live):
    """Two calls in one round run together; the one that hangs reaches the model as an error when the turn
    deadline leaves no more time (a quarter of it is kept for the answer); the long one is cut with a note."""
    mcp_server.hang_s = 30
    add_crm(client, mcp_server.url)
    _give_tools(client, live.services.settings.agent_id, "crm.*")
    fake_openai.echo_tool_results = True
    fake_openai.script_tool_calls(("crm__lookup_order", {"order": "4411"}), ("crm__order_history", {"order": "4411"}))

    started = time.monotonic()
    answer = ask(client, "Where is my order 4411?")
    took = time.monotonic() - started

    assert took < 4.0, took
    assert sorted(c["tool"] for c in mcp_server.calls) == ["lookup_order", "order_history"]
    hanging, history = _tool_messages(fake_openai.chat_requests()[1])
    assert json.loads(hanging["content"])["error"].startswith("no answer within 2.")
    assert len(history["content"]) < 8200
    assert history["content"].endswith("[cut: the tool answered 49890 characters; only the first 8000 are shown]")
    assert answer["reply"]["text"].startswith("From the tools: {\"error\": \"no answer within")
    lookup, long = trace_of(client, answer["turn_id"])["tool_calls"]
    assert lookup["name"] == "crm.lookup_order" and lookup["error"].startswith("no answer within")
    assert lookup["result"] is None and 2000 < lookup["ms"] < 4000
    assert long["name"] == "crm.order_history" and long["error"] is None and len(long["result"]) == 2000


def test_an_agent_api_invoke_calls_the_versions_tools(client, mcp_server, fake_openai):
    add_crm(client, mcp_server.url)
    agent = client.post("/v1/agents", headers=ADMIN, json={"name": "booker", "config": {
        "tools": [{"name": "crm.book_table"}], "llmModelId": "booking-model"}}).json()
    key = client.post("/api/keys", headers=ADMIN, json={"name": "site", "agents": [agent["id"]]}).json()["key"]
    fake_openai.echo_tool_results = True
    fake_openai.script_tool_calls(("crm__book_table", {"party_size": 3, "day": "Sunday"}))

    answer = client.post(f"/v1/agents/{agent['id']}/versions/latest/invoke",
                         headers={"Authorization": f"Bearer {key}"},
                         json={"messages": [{"role": "user", "content": "A table for three on Sunday"}]})

    assert answer.status_code == 200, answer.text
    call, output, message = answer.json()["output"]  # the tool call and its result are output items
    assert call == {"type": "function_call", "status": "completed", "call_id": "call_0", "name": "crm.book_table",
                    "arguments": '{"party_size": 3, "day": "Sunday"}'}
    assert output == {"type": "function_call_output", "call_id": "call_0",
                      "output": "Booked: a table for 3 on Sunday, reference BK-1001."}
    assert message["content"][0]["text"] == "From the tools: Booked: a table for 3 on Sunday, reference BK-1001."
    assert [c["arguments"] for c in mcp_server.calls] == [{"party_size": 3, "day": "Sunday"}]
    tool_rounds = [r for r in fake_openai.chat_requests() if r["body"].get("tools")]
    assert [r["body"]["model"] for r in tool_rounds] == ["booking-model", "booking-model"]

    fake_openai.script_tool_calls(("crm__book_table", {"party_size": 2, "day": "Monday"}))
    with client.stream("POST", f"/v1/agents/{agent['id']}/versions/latest/invoke-stream",
                       headers={"Authorization": f"Bearer {key}"},
                       json={"messages": [{"role": "user", "content": "And two on Monday"}]}) as streamed:
        events = [json.loads(line) for line in streamed.iter_lines() if line]
    kinds = [e["object"] for e in events]
    assert kinds.index("response.tool_call") < kinds.index("response.tool_result") < kinds.index("response.delta")
    assert kinds[-1] == "response.completed"
    started = next(e for e in events if e["object"] == "response.tool_call")
    done = next(e for e in events if e["object"] == "response.tool_result")
    assert started["name"] == done["name"] == "crm.book_table" and started["callId"] == done["callId"]
    assert started["arguments"] == {"party_size": 2, "day": "Monday"}
    assert done["output"] == "Booked: a table for 2 on Monday, reference BK-1002." and done["error"] is None
    assert "".join(e["text"] for e in events if e["object"] == "response.delta") == \
        "From the tools: Booked: a table for 2 on Monday, reference BK-1002."


def test_a_tool_answering_20_mb_is_an_error_the_model_explains(client, mcp_server, fake_openai, tool_settings):
    add_crm(client, mcp_server.url)
    _give_tools(client, tool_settings.agent_id, "crm.order_dump")
    fake_openai.echo_tool_results = True
    fake_openai.script_tool_calls(("crm__order_dump", {"order": "4411"}))

    started = time.monotonic()
    answer = ask(client, "Tell me everything about order 4411")

    assert time.monotonic() - started < tool_settings.tool_timeout_s  # ended by the size cap, not waited out
    [dump] = _tool_messages(fake_openai.chat_requests()[1])
    error = json.loads(dump["content"])["error"]
    assert error.endswith("/mcp is larger than the limit of 4194304 bytes (decoded)"), error
    assert answer["reply"]["text"] == "From the tools: " + dump["content"]
    [call] = trace_of(client, answer["turn_id"])["tool_calls"]
    assert call["error"] == error and call["result"] is None

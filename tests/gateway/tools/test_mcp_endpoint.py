"""/mcp: a real MCP client (the official SDK, streamable HTTP) lists ``ask`` and ``search_knowledge`` with
an agent API key, gets the agent's answer through the pipeline, and searches only its agent's
knowledge bases; without a key, or with a wrong one, the endpoint answers 401."""

from __future__ import annotations

import json

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.tools.conftest import ADMIN


def _setup(client: httpx.Client) -> tuple[str, str]:
    for name, topic in (("bikes", {"source": "tandem", "title": "Tandem rental",
                                   "facts": ["50 euros a day"], "summary": "Tandems cost 50 euros a day."}),
                        ("payroll", {"source": "salaries", "title": "Salaries",
                                     "facts": ["tandem mechanic salary"], "summary": "Tandem mechanics earn 3000."})):
        assert client.post("/api/kb/bases", headers=ADMIN, json={"name": name}).status_code == 201
        assert client.post(f"/api/kb/topics?kb={name}", headers=ADMIN, json=topic).status_code == 201
    keys = []
    for agent, kb in (("renter", "bikes"), ("hr", "payroll")):
        made = client.post("/v1/agents", headers=ADMIN, json={"name": agent, "config": {"knowledgeBases": [kb]}})
        assert made.status_code == 201, made.text
        key = client.post("/api/keys", headers=ADMIN, json={"name": agent, "agents": [made.json()["id"]]})
        assert key.status_code == 201, key.text
        keys.append(key.json()["key"])
    return keys[0], keys[1]


async def _with_session(url: str, key: str, work):
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http, \
            streamable_http_client(url, http_client=http) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        return await work(session)


async def test_an_mcp_client_asks_and_searches_with_a_key(client, live, fake_openai):
    renter_key, _hr_key = _setup(client)
    url = live.url + "/mcp"

    async def work(session: ClientSession):
        tools = await session.list_tools()
        asked = await session.call_tool("ask", {"question": "How much is a tandem?"})
        searched = await session.call_tool("search_knowledge", {"query": "tandem", "top_k": 5})
        return tools, asked, searched

    tools, asked, searched = await _with_session(url, renter_key, work)
    assert sorted(t.name for t in tools.tools) == ["ask", "search_knowledge"]
    assert not asked.isError, asked
    answer = json.loads(asked.content[0].text)
    assert answer["answer"] == "echo: How much is a tandem?"
    assert [s["source"] for s in answer["sources"]] == ["tandem"]
    [request] = [r for r in fake_openai.chat_requests()  # the reply's (a search request may come first)
                 if r["body"]["messages"][-1]["content"] == "How much is a tandem?"]
    assert "Tandems cost 50 euros a day." in request["body"]["messages"][0]["content"]
    results = json.loads(searched.content[0].text)["results"]
    assert [r["source"] for r in results] == ["tandem"]  # the hr agent's payroll base is not searched
    assert results[0]["text"] == "Tandems cost 50 euros a day." and results[0]["score"] > 0


def test_without_a_key_or_with_a_wrong_one_it_is_401(client, live):
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    for auth in ({}, {"Authorization": "Bearer sbk_not-a-key"}, ADMIN):
        answer = client.post("/mcp", json=body, headers={**headers, **auth})
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"] == "unauthorized" and "API key" in answer.json()["message"]

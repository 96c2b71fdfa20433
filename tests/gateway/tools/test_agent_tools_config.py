"""``config.tools`` on an agent: names of listed tools (or ``<source>.*``) are kept with the version; a
name no source lists is a 422 naming it, and the agent is not changed."""

from __future__ import annotations

from tests.gateway.tools.conftest import ADMIN, add_crm


def test_an_agent_takes_listed_tools_and_refuses_unknown_ones(client, mcp_server):
    add_crm(client, mcp_server.url)
    made = client.post("/v1/agents", headers=ADMIN, json={"name": "booker", "config": {
        "tools": [{"name": "crm.book_table"}, {"name": "crm.lookup_order", "confirm": True}]}})
    assert made.status_code == 201, made.text
    agent = made.json()
    assert agent["config"]["tools"] == [{"name": "crm.book_table", "confirm": False},
                                        {"name": "crm.lookup_order", "confirm": True}]
    for tools, unknown in (([{"name": "crm.cancel_everything"}], "crm.cancel_everything"),
                           ([{"name": "shop.*"}], "shop.*"),
                           ([{"name": "crm.*"}, {"name": "billing.refund"}], "billing.refund")):
        answer = client.patch(f"/v1/agents/{agent['id']}", headers=ADMIN, json={"config": {"tools": tools}})
        assert answer.status_code == 422, answer.text
        assert answer.json()["message"].startswith(f"config.tools: unknown tool {unknown};"), answer.json()
    refused = client.post("/v1/agents", headers=ADMIN, json={"name": "other", "config": {
        "tools": [{"name": "crm.nope"}]}})
    assert refused.status_code == 422 and "crm.nope" in refused.json()["message"]
    assert client.get("/v1/agents/other", headers=ADMIN).status_code == 404
    kept = client.get(f"/v1/agents/{agent['id']}", headers=ADMIN).json()
    assert kept["config"]["tools"] == agent["config"]["tools"]
    assert len(client.get(f"/v1/agents/{agent['id']}/versions", headers=ADMIN).json()["versions"]) == 1
    every = client.patch(f"/v1/agents/{agent['id']}", headers=ADMIN, json={"config": {"tools": [{"name": "crm.*"}]}})
    assert every.status_code == 200 and every.json()["config"]["tools"] == [{"name": "crm.*", "confirm": False}]

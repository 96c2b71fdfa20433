"""An agent's ``citations`` override: a numbered context, verified [N] markers, and sourceNodes that
match the sources stored on the reply in the conversation's transcript."""

from __future__ import annotations

from tests.gateway.agents.conftest import ADMIN, key_for, make_agent


def test_agent_citations_number_the_context_and_store_the_sources(api, fake_openai):
    agent = make_agent(api, citations={"format": "inline"})
    assert agent["config"]["citations"] == {"format": "inline", "verify": None}
    auth = {"Authorization": f"Bearer {key_for(api, agent['id'])}"}
    fake_openai.script_reply("Tandems are 50 euros a day [1][5].")
    out = api.post(f"/v1/agents/{agent['id']}/versions/latest/invoke", headers=auth,
                   json={"messages": [{"role": "user", "content": "How much is a tandem?"}], "limit": 1}).json()
    assert out["output"][0]["content"][0]["text"] == "Tandems are 50 euros a day [1]."
    system = fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]
    assert "[1] Tandem rental\nTandems cost 50 euros a day." in system and "square brackets" in system
    [node] = out["customOutputs"]["sourceNodes"]
    assert (node["n"], node["chunkId"], node["title"], node["cited"]) == (1, "tandem", "Tandem rental", True)

    [row] = [r for r in api.get("/api/conversations", params={"channel": "api"}, headers=ADMIN).json()[
        "conversations"]]
    transcript = api.get(f"/api/conversations/{row['id']}", headers=ADMIN).json()
    [reply] = [m for m in transcript["messages"] if m["role"] == "agent"]
    assert [(s["n"], s["source"], s["cited"]) for s in reply["sources"]] == [(1, "tandem", True)]
    assert transcript["traces"][0]["citations"] == {"format": "inline", "verify": True, "cited": [1], "invalid": [5]}


def test_an_invocation_may_turn_citations_off(api, fake_openai):
    agent = make_agent(api, citations={"format": "footnote"})
    auth = {"Authorization": f"Bearer {key_for(api, agent['id'])}"}
    fake_openai.script_reply("Tandems are 50 euros a day [9].")
    out = api.post(f"/v1/agents/{agent['id']}/versions/latest/invoke", headers=auth,
                   json={"messages": [{"role": "user", "content": "How much is a tandem?"}],
                         "citations": {"format": "none"}}).json()
    assert out["output"][0]["content"][0]["text"] == "Tandems are 50 euros a day [9]."
    assert "[1] Tandem rental" not in fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]
    bad = api.post(f"/v1/agents/{agent['id']}/versions/latest/invoke", headers=auth,
                   json={"messages": [{"role": "user", "content": "hi"}], "citations": {"format": "endnote"}})
    assert bad.status_code == 400 and "citations.format" in bad.json()["message"]

"""The gateway's own channel agent is one of the agents: made on start from the settings when it does
not exist, under the id that is also its Redis namespace, and left alone once it does."""

from __future__ import annotations

import httpx

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer
from tests.gateway.agents.conftest import ADMIN


def test_the_channels_agent_is_made_from_the_settings_and_kept_across_restarts(settings):
    mine = settings.model_copy(update={"retrieval_mode": "agentic", "retrieval_kbs": " main , ",
                                       "rag_top_k": 4, "llm_model": "model-x"})
    with LiveServer(create_app(mine)) as server, httpx.Client(base_url=server.url, timeout=20) as api:
        agent = api.get(f"/v1/agents/{mine.agent_id}", headers=ADMIN).json()
        assert agent["id"] == agent["name"] == mine.agent_id
        assert {k: agent["config"][k] for k in ("retrievalMode", "knowledgeBases", "limit", "llmModelId")} == {
            "retrievalMode": "agentic", "knowledgeBases": ["main"], "limit": 4, "llmModelId": "model-x"}
        [version] = api.get(f"/v1/agents/{mine.agent_id}/versions", headers=ADMIN).json()["versions"]
        changed = api.patch(f"/v1/agents/{mine.agent_id}", headers=ADMIN, json={"config": {"limit": 6}}).json()

    inline = mine.model_copy(update={"retrieval_mode": "inline"})
    with LiveServer(create_app(inline)) as server, httpx.Client(base_url=server.url, timeout=20) as api:
        again = api.get(f"/v1/agents/{mine.agent_id}", headers=ADMIN).json()
        assert again["latestVersionId"] == changed["version_id"] != version["versionId"]
        assert again["config"]["limit"] == 6 and again["config"]["retrievalMode"] == "agentic"  # not remade


def test_the_default_channels_agent_is_inline(gateway, settings):
    with httpx.Client(base_url=gateway.url, timeout=20) as api:
        listed = {a["id"]: a for a in api.get("/v1/agents", headers=ADMIN).json()["agents"]}
    assert settings.retrieval_mode == "inline" and listed[settings.agent_id]["config"]["retrievalMode"] == "inline"
    assert listed[settings.agent_id]["config"]["limit"] == settings.rag_top_k


def test_retrieval_controls_of_the_channels_agent_apply_to_channel_turns(gateway, fake_openai, settings):
    with httpx.Client(base_url=gateway.url, timeout=20) as api:
        api.post("/api/kb/topics", headers=ADMIN, json={
            "source": "rent", "title": "E-bike rental prices", "summary": "E-bikes cost 35 euros per day."})
        bad = api.patch(f"/v1/agents/{settings.agent_id}", headers=ADMIN,
                        json={"config": {"retrievalControls": {"relevance_threshold": 2}}})
        assert bad.status_code in (400, 422) and "relevance_threshold" in bad.text
        assert api.patch(f"/v1/agents/{settings.agent_id}", headers=ADMIN, json={
            "config": {"retrievalControls": {"relevance_threshold": 0.99}}}).status_code == 200
        session = api.post("/api/chat/sessions").json()
        fake_openai.script_json({"search_result": {"article_id_1": "rent", "article_id_2": "none",
                                                   "article_id_3": "none"}})
        fake_openai.script_reply("I don't know that.")
        reply = api.post(f"/api/chat/sessions/{session['session_id']}/messages",
                         json={"text": "How much is an e-bike?"},
                         headers={"Authorization": f"Bearer {session['token']}"})
        assert reply.status_code == 200 and reply.json()["sources"] == []
        system = fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]
        assert "No additional information" in system and "35 euros" not in system

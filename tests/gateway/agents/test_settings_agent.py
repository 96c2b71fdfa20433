"""The channels' agent follows the settings it was made from until an operator edits it (issue 30)."""

from __future__ import annotations

import httpx

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer

ADMIN = {"Authorization": "Bearer admin-secret"}


def _config(settings) -> dict:
    with LiveServer(create_app(settings)) as server:
        return httpx.get(f"{server.url}/v1/agents/{settings.agent_id}", headers=ADMIN, timeout=20).json()["config"]


def test_a_new_model_setting_reaches_the_agent_until_an_operator_edits_it(settings):
    assert _config(settings.model_copy(update={"llm_model": "gpt-4o-mini"}))["llmModelId"] == "gpt-4o-mini"
    moved = settings.model_copy(update={"llm_model": "gpt-5-small", "retrieval_mode": "agentic"})
    config = _config(moved)
    assert config["llmModelId"] == "gpt-5-small" and config["retrievalMode"] == "agentic"

    with LiveServer(create_app(moved)) as server:
        edited = httpx.patch(f"{server.url}/v1/agents/{settings.agent_id}", headers=ADMIN, timeout=20,
                             json={"config": {"llmModelId": "operator-choice"}})
        assert edited.status_code == 200, edited.text
    # The operator's edit stands over a later settings change.
    assert _config(settings.model_copy(update={"llm_model": "gpt-6"}))["llmModelId"] == "operator-choice"

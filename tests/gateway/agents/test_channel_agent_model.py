"""An agent's own model and inference settings (``llmModelId``, ``inferenceConfig``) answer its channel turns
too, not only its agent API calls: the model server gets them, the trace and the cost name the model. An
agent that sets neither answers with the settings' model and temperature, as before."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from gateway.core.settings import ModelPrice
from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer
from tests.gateway.agents.conftest import ADMIN
from tests.gateway.tools.conftest import ask, trace_of

PRICES = {"model-a": ModelPrice(input=2.5, output=10.0), "model-v": ModelPrice(input=0.15, output=0.6)}
OWN = {"llmModelId": "model-v", "inferenceConfig": {"temperature": 0.2, "maxTokens": 300}}


@pytest.fixture
def web(settings) -> Iterator[httpx.Client]:
    tuned = settings.model_copy(update={"llm_model": "model-a", "llm_temperature": 0.5, "model_prices": PRICES})
    with LiveServer(create_app(tuned)) as server, httpx.Client(base_url=server.url, timeout=20) as client:
        yield client


def _own_config(web: httpx.Client, agent_id: str, **more) -> None:
    """Before the first turn: the channels read their agent's definition at most every few seconds."""
    answer = web.patch(f"/v1/agents/{agent_id}", headers=ADMIN, json={"config": {**OWN, **more}})
    assert answer.status_code == 200, answer.text


def test_a_web_chat_turn_goes_to_its_agents_model_with_its_inference_settings(web, fake_openai, settings):
    _own_config(web, settings.agent_id)
    fake_openai.script_reply("Tandems cost 50 euros a day.")

    answer = ask(web, "How much is a tandem?")

    [request] = fake_openai.chat_requests()
    body = request["body"]
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("model-v", 0.2, 300)
    assert trace_of(web, answer["turn_id"])["model"] == "model-v"
    report = web.get("/api/insights", headers=ADMIN).json()
    prompt, completion = report["tokens"]["prompt"], report["tokens"]["completion"]
    assert prompt > 0 and report["tokens"]["unpriced"] == 0
    assert report["cost"] == pytest.approx((prompt * 0.15 + completion * 0.6) / 1e6, abs=1e-12)


def test_the_tool_rounds_of_a_channel_turn_go_to_its_agents_model(web, fake_openai, settings):
    _own_config(web, settings.agent_id, tools=[{"name": "handoff"}])
    fake_openai.script_reply("We open at nine.")

    answer = ask(web, "When do you open?")

    [request] = fake_openai.chat_requests()
    body = request["body"]
    assert [t["function"]["name"] for t in body["tools"]] == ["handoff"]  # the tool loop asked
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("model-v", 0.2, 300)
    assert trace_of(web, answer["turn_id"])["model"] == "model-v"


def test_an_agent_without_its_own_model_answers_with_the_settings(web, fake_openai, settings):
    agent = web.get(f"/v1/agents/{settings.agent_id}", headers=ADMIN).json()
    assert agent["config"]["llmModelId"] == "model-a"  # the channels' agent, as made from the settings
    fake_openai.script_reply("We open at nine.")

    answer = ask(web, "When do you open?")

    [request] = fake_openai.chat_requests()
    body = request["body"]
    assert (body["model"], body["temperature"]) == ("model-a", 0.5) and "max_tokens" not in body
    assert trace_of(web, answer["turn_id"])["model"] == "model-a"

"""An agent answers the same way on every entry: the web chat, ``invoke`` and ``/v1/chat/completions`` (the
real ``openai`` client) send the model the same system prompt — the business's template with its name,
instructions, hours and calendar — and an agent's own ``systemPrompt`` replaces only the instructions."""

from __future__ import annotations

import re

import httpx
import openai
import pytest

from tests.gateway.agents.conftest import ADMIN, key_for, make_agent

QUESTION = "When are you open?"
ATTRIBUTES = {
    "project_attributes_setting_business_name": "Clay Corner Studio",
    "project_attributes_setting_business_instructions": "Sign every answer with 'Your studio team'.",
    "project_attributes_setting_business_hours": {"mon": "09:00-17:00", "sun": "closed"},
}
OWN_PROMPT = "You answer for the bookings desk only.\n{context_str}\nQuestion: {query_str}"


@pytest.fixture
def settings(settings):
    """Retrieval as an agent definition's ``hybridSearch`` does it on both entries (the web chat's default,
    ``hybrid_llm``, would add a model call of its own): the prompts compared differ in nothing else."""
    return settings.model_copy(update={"retrieval_strategy": "hybrid"})


def _set_live_data(api: httpx.Client) -> None:
    for name, value in ATTRIBUTES.items():
        assert api.put(f"/api/attributes/{name}", headers=ADMIN, json={"value": value}).status_code == 200


def _sent(fake_openai) -> list[dict]:
    """The messages of the model call just made, with the one word that names the entry made neutral."""
    messages = fake_openai.chat_requests()[-1]["body"]["messages"]
    system = re.sub(r"You talk with customers on \w+\.", "You talk with customers on ENTRY.", messages[0]["content"])
    return [{"role": "system", "content": system}, *messages[1:]]


def _web_chat(api: httpx.Client, fake_openai) -> list[dict]:
    session = api.post("/api/chat/sessions").json()
    fake_openai.script_reply("We are open Monday 9 to 5.")
    answer = api.post(f"/api/chat/sessions/{session['session_id']}/messages", json={"text": QUESTION},
                      headers={"Authorization": f"Bearer {session['token']}"})
    assert answer.json()["reply"]["text"] == "We are open Monday 9 to 5."
    return _sent(fake_openai)


def _invoke(api: httpx.Client, fake_openai, key: str, agent: str) -> list[dict]:
    fake_openai.script_reply("We are open Monday 9 to 5.")
    answer = api.post(f"/v1/agents/{agent}/versions/latest/invoke", headers={"Authorization": f"Bearer {key}"},
                      json={"messages": [{"role": "user", "content": QUESTION}]})
    assert answer.status_code == 200, answer.text
    return _sent(fake_openai)


def _completions(gateway, fake_openai, key: str, agent: str) -> list[dict]:
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)
    fake_openai.script_reply("We are open Monday 9 to 5.")
    answer = client.chat.completions.create(model=agent, messages=[{"role": "user", "content": QUESTION}])
    assert answer.choices[0].message.content == "We are open Monday 9 to 5."
    return _sent(fake_openai)


def test_the_default_agent_gets_the_web_chats_prompt_through_invoke_and_chat_completions(api, gateway, fake_openai,
                                                                                         settings):
    _set_live_data(api)
    default = settings.agent_id  # the channels' agent ("default" unless SWITCHBOARD_AGENT_ID says otherwise)
    key = key_for(api, default)
    web = _web_chat(api, fake_openai)
    system = web[0]["content"]
    assert system.startswith("You are Switchboard, the AI assistant of Clay Corner Studio.")
    assert "Sign every answer with 'Your studio team'." in system
    assert re.search(r"Monday \d+\w\w of \w+ \d{4}: open 09:00-17:00", system)
    assert "Opening hours\nWe open 9:00-17:00." in system  # the retrieved topic
    assert _invoke(api, fake_openai, key, default) == web
    assert _completions(gateway, fake_openai, key, default) == web


def test_an_agents_own_system_prompt_replaces_only_the_instructions(api, gateway, fake_openai, settings):
    _set_live_data(api)
    default = settings.agent_id
    agent = make_agent(api, "bookings", systemPrompt=OWN_PROMPT)
    key = key_for(api, agent["id"], default)
    for sent in (_invoke(api, fake_openai, key, "bookings"), _completions(gateway, fake_openai, key, "bookings")):
        system = sent[0]["content"]
        assert system.startswith("You are Switchboard, the AI assistant of Clay Corner Studio.")
        assert "You answer for the bookings desk only." in system
        assert "Sign every answer" not in system  # the console's instructions are the other agents'
        assert "Context information is below" not in system
        assert re.search(r"open 09:00-17:00", system) and "<ConvoAgentCalendar>" in system
        assert "Opening hours\nWe open 9:00-17:00." in system

    # The channels' agent with a prompt of its own (no web-chat turn has read its definition yet, which the
    # channels keep for 5 s): the web chat follows it as the API does.
    patched = api.patch(f"/v1/agents/{default}", headers=ADMIN, json={"config": {"systemPrompt": OWN_PROMPT}})
    assert patched.status_code == 200, patched.text
    api_sent = _invoke(api, fake_openai, key, default)
    assert "You answer for the bookings desk only." in api_sent[0]["content"]
    assert _web_chat(api, fake_openai) == api_sent


def test_an_api_conversation_is_shown_under_the_callers_user(api, gateway, fake_openai, settings):
    key = key_for(api, settings.agent_id)
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)
    fake_openai.script_reply("Hello Ada.")
    client.chat.completions.create(model=settings.agent_id, user="ada@example.com",
                                   messages=[{"role": "user", "content": "Hi, it's Ada"}])
    fake_openai.script_reply("Hello again.")
    list(client.chat.completions.create(model=settings.agent_id, user="bob", stream=True,
                                        messages=[{"role": "user", "content": "Hi, it's Bob"}]))
    rows = api.get("/api/conversations", headers=ADMIN).json()["conversations"]
    assert sorted((r["channel"], r["persona"]) for r in rows) == [("api", "ada@example.com"), ("api", "bob")]

"""Any OpenAI client can talk to an agent: the real ``openai`` Python client against
/v1/chat/completions (plain and streamed, usage included) and /v1/models, with a version pinned by id."""

from __future__ import annotations

import uuid

import openai

from tests.gateway.agents.conftest import ADMIN, key_for, make_agent


def test_the_openai_client_plain_streamed_pinned_and_listed(api, gateway, fake_openai):
    agent = make_agent(api, "bikes")
    first_version = agent["version_id"]
    key = key_for(api, agent["id"])
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)

    fake_openai.script_reply("Tandems are 50 euros a day.")
    answer = client.chat.completions.create(model="bikes", messages=[
        {"role": "system", "content": "ignored: the agent has its own"},
        {"role": "user", "content": "How much is a tandem?"}])
    assert answer.choices[0].message.content == "Tandems are 50 euros a day."
    assert answer.choices[0].finish_reason == "stop" and answer.usage.total_tokens > 0
    assert answer.model_extra["sources"][0]["chunk_id"] == "tandem"
    sent = fake_openai.chat_requests()[-1]["body"]["messages"]
    assert "ignored" not in str(sent)

    fake_openai.script_reply("We open at nine every day.")
    stream = client.chat.completions.create(model="bikes", stream=True, stream_options={"include_usage": True},
                                            user="ada", messages=[{"role": "user", "content": "opening hours?"}])
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "We open at nine every day."
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0  # the usage chunk comes last
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason == "stop"]
    assert len(finish) == 1 and finish[0].model_extra["sources"][0]["chunk_id"] == "hours"

    client.chat.completions.create(model="bikes", user="ada", messages=[{"role": "user", "content": "and Sunday?"}])
    assert {"role": "assistant", "content": "We open at nine every day."} in \
        fake_openai.chat_requests()[-1]["body"]["messages"]  # "user" keeps a session on the server

    api.patch(f"/v1/agents/{agent['id']}", headers=ADMIN, json={"config": {"inferenceConfig": {"temperature": 0.1}}})
    client.chat.completions.create(model=f"bikes@{first_version}", messages=[{"role": "user", "content": "hi"}])
    assert fake_openai.chat_requests()[-1]["body"]["temperature"] == 0.7  # pinned: the first version's
    client.chat.completions.create(model="bikes", messages=[{"role": "user", "content": "hi"}])
    assert fake_openai.chat_requests()[-1]["body"]["temperature"] == 0.1  # latest moved

    assert [m.id for m in client.models.list()] == ["bikes"]
    other = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="sbk_" + uuid.uuid4().hex, max_retries=0)
    try:
        other.chat.completions.create(model="bikes", messages=[{"role": "user", "content": "hi"}])
        raise AssertionError("an unknown key was accepted")
    except openai.AuthenticationError as exc:
        assert exc.status_code == 401

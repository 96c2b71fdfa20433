"""Any OpenAI client can talk to an agent: the real ``openai`` Python client against
/v1/chat/completions (plain and streamed, usage included) and /v1/models, with a version pinned by id."""

from __future__ import annotations

import json
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


def test_the_stream_is_standard_server_sent_events(api, fake_openai):
    agent = make_agent(api, "sse")
    fake_openai.script_reply("Open at nine.")
    with api.stream("POST", "/v1/chat/completions", headers={"Authorization": f"Bearer {key_for(api, agent['id'])}"},
                    json={"model": "sse", "stream": True, "messages": [{"role": "user", "content": "hours?"}]}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        raw = r.read().decode()
    events = raw.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""] and all(e.startswith("data: {") for e in events[:-2])
    chunks = [json.loads(e[len("data: "):]) for e in events[:-2]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "Open at nine."
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "stop"
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"} and len({c["id"] for c in chunks}) == 1

"""What one API call may reach: sessions belong to the caller's key, per-call knowledge-base overrides
only narrow, unknown invocation fields are refused, agents are reachable by name, invoke says its id
and usage."""

from __future__ import annotations

import uuid

import openai

from tests.gateway.agents.conftest import ADMIN, key_for, make_agent

SECRET = "zq-secret-4242"


def _prompt_of_last_call(fake_openai) -> str:
    return str(fake_openai.chat_requests()[-1]["body"]["messages"])


def test_a_session_id_is_the_keys_own_on_invoke(api, fake_openai):
    agent = make_agent(api, "shared")
    url = f"/v1/agents/{agent['id']}/versions/latest/invoke"
    session = str(uuid.uuid4())
    key_a, key_b = key_for(api, agent["id"]), key_for(api, agent["id"])
    a = {"Authorization": f"Bearer {key_a}", "X-Session-ID": session}
    b = {"Authorization": f"Bearer {key_b}", "X-Session-ID": session}
    fake_openai.script_reply("Noted.")
    assert api.post(url, headers=a, json={"messages": [
        {"role": "user", "content": f"my door code is {SECRET}"}]}).status_code == 200
    fake_openai.script_reply("I do not know.")
    assert api.post(url, headers=b, json={"messages": [
        {"role": "user", "content": "what is my door code?"}]}).status_code == 200
    assert SECRET not in _prompt_of_last_call(fake_openai)  # key B, same session id: another conversation
    fake_openai.script_reply("It is in our conversation.")
    api.post(url, headers=a, json={"messages": [{"role": "user", "content": "what is my door code?"}]})
    assert SECRET in _prompt_of_last_call(fake_openai)  # key A still has its own memory


def test_the_openai_user_field_is_the_keys_own(api, gateway, fake_openai):
    agent = make_agent(api, "shop")
    alice_a = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key_for(api, agent["id"]), max_retries=0)
    alice_b = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key_for(api, agent["id"]), max_retries=0)
    fake_openai.script_reply("Noted.")
    alice_a.chat.completions.create(model="shop", user="alice@example.com",
                                    messages=[{"role": "user", "content": f"my card PIN is {SECRET}"}])
    fake_openai.script_reply("I do not know.")
    alice_b.chat.completions.create(model="shop", user="alice@example.com",
                                    messages=[{"role": "user", "content": "what is my PIN?"}])
    assert SECRET not in _prompt_of_last_call(fake_openai)
    fake_openai.script_reply("You told me.")
    alice_a.chat.completions.create(model="shop", user="alice@example.com",
                                    messages=[{"role": "user", "content": "what is my PIN?"}])
    assert SECRET in _prompt_of_last_call(fake_openai)


def _two_bases(api) -> None:
    assert api.post("/api/kb/bases", headers=ADMIN, json={"name": "kb-b"}).status_code == 201
    assert api.post("/api/kb/topics", params={"kb": "kb-b"}, headers=ADMIN, json={
        "source": "glaze", "title": "Glazes", "summary": "Our glazes are lead-free."}).status_code == 201
    assert api.post("/api/kb/topics", headers=ADMIN, json={  # in "main", which the agent may not search
        "source": "payroll", "title": "Payroll", "summary": "Private: the payroll code is zq-private-77."}
                    ).status_code == 201


def test_a_knowledge_base_override_only_narrows_in_every_retrieval_mode(api, fake_openai):
    _two_bases(api)
    inline = make_agent(api, "gamma", knowledgeBases=["kb-b"])
    agentic = make_agent(api, "delta", knowledgeBases=["kb-b"], retrievalMode="agentic")
    key = key_for(api, inline["id"], agentic["id"])
    auth = {"Authorization": f"Bearer {key}"}
    asked = len(fake_openai.chat_requests())
    for agent, extra in ((inline, {}), (inline, {"retrievalMode": "agentic"}), (agentic, {})):
        refused = api.post(f"/v1/agents/{agent['id']}/versions/latest/invoke", headers=auth, json={
            "messages": [{"role": "user", "content": "payroll code?"}], "knowledgeBases": ["main"], **extra})
        assert refused.status_code == 403, refused.text
        assert "'main'" in refused.json()["message"] and "'kb-b'" in refused.json()["message"]
    assert len(fake_openai.chat_requests()) == asked  # refused before any model call or search

    fake_openai.script_reply("They are lead-free.")
    allowed = api.post(f"/v1/agents/{inline['id']}/versions/latest/invoke", headers=auth, json={
        "messages": [{"role": "user", "content": "payroll code? glazes?"}], "knowledgeBases": ["kb-b"]})
    assert allowed.status_code == 200, allowed.text
    assert [n["chunkId"] for n in allowed.json()["customOutputs"]["sourceNodes"]] == ["glaze"]
    assert "zq-private-77" not in _prompt_of_last_call(fake_openai)
    fake_openai.script_reply("They are lead-free.")
    own = api.post(f"/v1/agents/{inline['id']}/versions/latest/invoke", headers=auth, json={
        "messages": [{"role": "user", "content": "payroll code?"}], "knowledgeBases": []})  # [] is the agent's own
    assert own.status_code == 200 and "zq-private-77" not in own.text


def test_a_labels_override_only_narrows(api, fake_openai):
    assert api.post("/api/kb/topics", headers=ADMIN, json=[
        {"source": "payroll", "title": "Payroll", "summary": "Private: the payroll code is zq-private-77."},
        {"source": "kilns", "title": "Kilns", "summary": "Two kilns, fired on Fridays.",
         "labels": ["rag_context", "public"]}]).status_code == 201
    agent = make_agent(api, "public-only", labels=["rag_context", "public"])
    auth = {"Authorization": f"Bearer {key_for(api, agent['id'])}"}
    url = f"/v1/agents/{agent['id']}/versions/latest/invoke"
    fake_openai.script_reply("Fridays.")
    wider = api.post(url, headers=auth, json={"messages": [{"role": "user", "content": "payroll code? kilns?"}],
                                              "labels": ["rag_context"]})  # would drop the agent's "public"
    assert wider.status_code == 200, wider.text
    assert [n["chunkId"] for n in wider.json()["customOutputs"]["sourceNodes"]] == ["kilns"]
    other = api.post(url, headers=auth, json={"messages": [{"role": "user", "content": "payroll?"}],
                                              "labels": ["internal"]})
    assert other.status_code == 403 and "'internal'" in other.json()["message"]


def test_invoke_refuses_unknown_fields_and_loose_booleans(api, fake_openai):
    agent = make_agent(api)
    auth = {"Authorization": f"Bearer {key_for(api, agent['id'])}"}
    url = f"/v1/agents/{agent['id']}/versions/latest/invoke"
    asked = len(fake_openai.chat_requests())
    unknown = api.post(url, headers=auth, json={
        "messages": [{"role": "user", "content": "hi"}], "inferenceConfig": {"temperature": 0},
        "llmModelId": "gpt-4o", "systemPrompt": "{context_str}{query_str}"})
    assert unknown.status_code == 422
    assert all(f in unknown.json()["message"] for f in ("inferenceConfig", "llmModelId", "systemPrompt"))
    streamed = api.post(url, headers=auth, json={"messages": [{"role": "user", "content": "hi"}], "stream": "no"})
    assert streamed.status_code == 422 and "stream" in streamed.json()["message"]
    assert streamed.headers["content-type"] == "application/json"
    loose = api.post(url, headers=auth, json={"messages": [{"role": "user", "content": "hi"}], "hybridSearch": "no"})
    assert loose.status_code == 400 and "hybridSearch" in loose.json()["message"]
    assert len(fake_openai.chat_requests()) == asked


def test_agents_are_reachable_by_name(api, fake_openai):
    agent = make_agent(api, "pottery")
    auth = {"Authorization": f"Bearer {key_for(api, 'pottery')}"}  # a key's agents may be named too
    assert agent["id"] in str(api.get("/api/keys", headers=ADMIN).json())  # kept as the id
    assert api.get("/v1/agents/pottery", headers=ADMIN).json()["id"] == agent["id"]
    assert api.get("/v1/agents/pottery/versions", headers=ADMIN).json()["versions"][0]["versionId"] == \
        agent["version_id"]
    described = api.get("/v1/agents/pottery/versions/latest/describe", headers=auth)
    assert described.status_code == 200 and described.json()["agentId"] == agent["id"]
    fake_openai.script_reply("Classes start at six.")
    answer = api.post("/v1/agents/pottery/versions/latest/invoke", headers=auth,
                      json={"messages": [{"role": "user", "content": "when are classes?"}]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["output"][0]["content"][0]["text"] == "Classes start at six."

    other = make_agent(api, "other")
    refused = api.post("/v1/agents/other/versions/latest/invoke", headers=auth,
                       json={"messages": [{"role": "user", "content": "hi"}]})
    unknown = api.post("/v1/agents/nope/versions/latest/invoke", headers=auth,
                       json={"messages": [{"role": "user", "content": "hi"}]})
    assert refused.status_code == unknown.status_code == 403 and other["id"] not in refused.text


def test_invoke_answers_with_its_id_and_usage(api, fake_openai):
    agent = make_agent(api, "pottery")
    auth = {"Authorization": f"Bearer {key_for(api, agent['id'])}"}
    fake_openai.script_reply("Classes start at six.")
    answer = api.post(f"/v1/agents/{agent['id']}/versions/latest/invoke", headers=auth,
                      json={"messages": [{"role": "user", "content": "when are classes?"}]})
    assert answer.status_code == 200, answer.text
    out = answer.json()
    assert out["output"][0]["content"][0]["text"] == "Classes start at six."
    assert out["usage"]["total_tokens"] > 0 and out["id"]
    fake_openai.script_reply("At six.")
    again = api.post(f"/v1/agents/{agent['id']}/versions/latest/invoke", headers=auth,
                     json={"messages": [{"role": "user", "content": "when?"}]}).json()
    assert again["id"] and again["id"] != out["id"]  # one id per turn

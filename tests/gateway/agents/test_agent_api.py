"""The agent API on a real server: agents with immutable versions, API keys (scoped, hashed,
rate-limited), invoke with sourceNodes and session memory, invoke-stream as NDJSON."""

from __future__ import annotations

import json
import time
import uuid

import redis

from tests.gateway.agents.conftest import ADMIN, key_for, make_agent


def test_versions_are_immutable_and_latest_moves(api):
    agent = make_agent(api)
    assert agent["config"]["hybridSearch"] is True and agent["config"]["limit"] == 2  # camelCase in and out
    first = agent["version_id"]
    patched = api.patch(f"/v1/agents/{agent['id']}", headers=ADMIN, json={"config": {"limit": 4},
                                                                          "description": "v2"})
    assert patched.status_code == 200 and patched.json()["version_id"] != first
    pinned = api.get(f"/v1/agents/{agent['id']}/versions/{first}", headers=ADMIN).json()
    latest = api.get(f"/v1/agents/{agent['id']}/versions/latest", headers=ADMIN).json()
    assert pinned["definition"]["config"]["limit"] == 2 and latest["definition"]["config"]["limit"] == 4
    versions = api.get(f"/v1/agents/{agent['id']}/versions", headers=ADMIN).json()["versions"]
    assert [v["versionId"] for v in versions] == [patched.json()["version_id"], first]

    bad = api.patch(f"/v1/agents/{agent['id']}", headers=ADMIN, json={"config": {"systemPrompt": "no slots"}})
    assert bad.status_code == 400
    assert bad.json() == {"status": 400, "error": "bad_request",
                          "message": "config.systemPrompt: must contain {context_str} and {query_str}"}
    assert api.post("/v1/agents", headers=ADMIN, json={"name": "helper"}).status_code == 409
    missing = api.get("/v1/agents/nope/versions/latest", headers=ADMIN)
    assert missing.status_code == 404 and set(missing.json()) == {"status", "error", "message"}
    assert api.delete(f"/v1/agents/{agent['id']}", headers=ADMIN).status_code == 204
    assert api.get(f"/v1/agents/{agent['id']}/versions/{first}", headers=ADMIN).status_code == 404


def test_the_channels_agent_is_one_of_the_agents(api, settings):
    listed = {a["id"]: a for a in api.get("/v1/agents", headers=ADMIN).json()["agents"]}
    assert listed[settings.agent_id]["config"]["retrievalMode"] == settings.retrieval_mode


def test_keys_are_scoped_hashed_revocable_and_rate_limited(api, settings, redis_url):
    mine, other = make_agent(api, "mine"), make_agent(api, "other")
    key = key_for(api, mine["id"], rate=2)
    url = f"/v1/agents/{mine['id']}/versions/latest/invoke"
    body = {"messages": [{"role": "user", "content": "tandem price?"}]}
    client = redis.Redis.from_url(redis_url)
    stored = b"".join(client.dump(k) or b"" for k in client.scan_iter(match=f"sb:{settings.agent_id}:apikeys*"))
    assert key.encode() not in stored  # only its hash is kept
    assert api.post(url, json=body).status_code == 401
    assert api.post(url, json=body, headers={"Authorization": "Bearer sbk_unknown"}).status_code == 401
    assert api.post(url, json=body, headers=ADMIN).status_code == 401  # the admin token is not a caller key
    assert api.get("/v1/agents", headers={"Authorization": f"Bearer {key}"}).status_code == 401  # nor the reverse
    wrong = api.post(f"/v1/agents/{other['id']}/versions/latest/invoke", json=body,
                     headers={"Authorization": f"Bearer {key}"})
    assert wrong.status_code == 403
    auth = {"Authorization": f"Bearer {key}"}
    if time.time() % 60 > 50:  # the limit counts per clock minute: do not straddle two
        time.sleep(61 - time.time() % 60)
    assert [api.post(url, json=body, headers=auth).status_code for _ in range(2)] == [200, 200]
    limited = api.post(url, json=body, headers=auth)
    assert limited.status_code == 429 and 1 <= int(limited.headers["retry-after"]) <= 60
    assert limited.json()["error"] == "rate_limited"
    [record] = api.get("/api/keys", headers=ADMIN).json()["keys"]
    assert "key" not in record
    assert api.delete(f"/api/keys/{record['id']}", headers=ADMIN).status_code == 204
    assert api.post(url, json=body, headers=auth).status_code == 401


def test_invoke_answers_with_source_nodes_and_keeps_session_memory(api, fake_openai):
    agent = make_agent(api)
    auth = {"Authorization": f"Bearer {key_for(api, agent['id'])}"}
    url = f"/v1/agents/{agent['id']}/versions/{agent['version_id']}/invoke"
    fake_openai.script_reply("Tandems are 50 euros a day.")
    session = {"X-Session-ID": str(uuid.uuid4()), **auth}
    answer = api.post(url, headers=session, json={"messages": [{"role": "user", "content": "How much is a tandem?"}],
                                                  "limit": 1})
    assert answer.status_code == 200, answer.text
    out = answer.json()
    assert out["object"] == "response" and out["output"][0]["content"][0] == {
        "type": "output_text", "text": "Tandems are 50 euros a day."}
    [node] = out["customOutputs"]["sourceNodes"]  # limit 1 for this invocation
    assert node["chunkId"] == "tandem" and node["score"] == 1.0 and "50 euros" in node["text"]
    assert out["customOutputs"]["ragMode"] == "normal"
    system = fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]
    assert "Tandems cost 50 euros a day." in system and "Query: How much is a tandem?" in system

    api.post(url, headers=session, json={"messages": [{"role": "user", "content": "And for two days?"}]})
    remembered = fake_openai.chat_requests()[-1]["body"]["messages"]
    assert {"role": "assistant", "content": "Tandems are 50 euros a day."} in remembered  # server-side memory

    bad = api.post(url, headers={**auth, "X-Session-ID": "not-a-uuid"}, json={"messages": [
        {"role": "user", "content": "hi"}]})
    assert bad.status_code == 400 and "UUID" in bad.json()["message"]
    last_not_user = api.post(url, headers=auth, json={"messages": [{"role": "assistant", "content": "hi"}]})
    assert last_not_user.status_code == 400 and 'role "user"' in last_not_user.json()["message"]


def test_invoke_stream_is_ndjson_and_ends_with_custom_outputs(api, fake_openai):
    agent = make_agent(api)
    auth = {"Authorization": f"Bearer {key_for(api, agent['id'])}"}
    fake_openai.script_reply("We open at nine.")
    with api.stream("POST", f"/v1/agents/{agent['id']}/versions/latest/invoke-stream", headers=auth,
                    json={"messages": [{"role": "user", "content": "opening hours?"}]}) as answer:
        assert answer.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in answer.iter_lines() if line]
    *deltas, last = lines
    assert "".join(d["text"] for d in deltas) == "We open at nine." and {d["object"] for d in deltas} == {
        "response.delta"}
    assert last["object"] == "response.completed" and last["customOutputs"]["sourceNodes"][0]["chunkId"] == "hours"

    fake_openai.script_broken_stream("We op", after_chars=5)
    with api.stream("POST", f"/v1/agents/{agent['id']}/versions/latest/invoke-stream", headers=auth,
                    json={"messages": [{"role": "user", "content": "hours?"}]}) as broken:
        assert broken.status_code == 200  # already sent when the model failed
        lines = [json.loads(line) for line in broken.iter_lines() if line]
    assert lines[-1]["object"] == "error" and lines[-1]["status"] == 502


def test_patching_the_channels_agent_changes_the_channels(api, settings, fake_openai):
    from gateway.knowledge.kb_tool import NAME

    session = api.post("/api/chat/sessions").json()
    auth = {"Authorization": f"Bearer {session['token']}"}
    path = f"/api/chat/sessions/{session['session_id']}/messages"
    api.post(path, json={"text": "tandem price?"}, headers=auth)
    assert not fake_openai.chat_requests()[-1]["body"].get("tools")  # inline, as the settings said
    patched = api.patch(f"/v1/agents/{settings.agent_id}", headers=ADMIN, json={"config": {"retrievalMode": "agentic"}})
    assert patched.status_code == 200
    time.sleep(5.1)  # each process reads the definition at most every 5 s
    fake_openai.script_tool_calls((NAME, {"action": "query", "kb_id": "main", "query_text": "tandem"}))
    fake_openai.script_reply("Tandems are 50 euros a day.")
    answer = api.post(path, json={"text": "and a tandem?"}, headers=auth).json()
    assert answer["reply"]["text"] == "Tandems are 50 euros a day."
    assert fake_openai.chat_requests()[-2]["body"]["tools"][0]["function"]["name"] == NAME

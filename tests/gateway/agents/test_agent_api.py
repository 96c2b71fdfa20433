"""Invoking an agent on a real server: invoke with sourceNodes and session memory, invoke-stream as
NDJSON. (Versions: test_agent_versions.py; keys: test_api_keys.py.)"""

from __future__ import annotations

import json
import time
import uuid

import httpx

from tests.gateway.agents.conftest import ADMIN, key_for, make_agent


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
    sent = fake_openai.chat_requests()[-1]["body"]["messages"]
    assert "Tandem rental\nTandems cost 50 euros a day." in sent[0]["content"]  # the template's knowledge section
    assert sent[-1] == {"role": "user", "content": "How much is a tandem?"}

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
        raw = answer.read().decode()
    assert raw.startswith(  # the exact bytes: one JSON object a line, the fake model's 4-character chunks
        '{"object": "response.delta", "text": "We o"}\n{"object": "response.delta", "text": "pen "}\n'
        '{"object": "response.delta", "text": "at n"}\n{"object": "response.delta", "text": "ine."}\n'
        '{"object": "response.completed", "createdAt": ')
    assert raw.endswith("}\n") and raw.count("\n") == 5
    lines = [json.loads(line) for line in raw.splitlines()]
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


def test_invoke_keeps_the_best_reranker_top_n_of_the_limit_retrieved(api, fake_openai):
    agent = make_agent(api, rerankerTopN=1)  # limit 2: both topics retrieved, one kept
    auth = {"Authorization": f"Bearer {key_for(api, agent['id'])}"}
    fake_openai.script_reply("Tandems are 50 euros a day.")
    answer = api.post(f"/v1/agents/{agent['id']}/versions/latest/invoke", headers=auth,
                      json={"messages": [{"role": "user", "content": "tandem price and opening hours?"}]})
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["customOutputs"]["sourceNodes"]) == 1
    system = fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]
    assert system.count("---\n\n") == 0  # one topic in the context, not two


def test_session_memory_ends_with_the_conversation_after_the_inactivity_timeout(settings, fake_openai):
    from gateway.http.app import create_app
    from tests.fakes.live_server import LiveServer

    with LiveServer(create_app(settings.model_copy(update={"inactivity_timeout_s": 1}))) as server, \
            httpx.Client(base_url=server.url, timeout=20) as api:
        agent = make_agent(api)
        headers = {"Authorization": f"Bearer {key_for(api, agent['id'])}", "X-Session-ID": str(uuid.uuid4())}
        url = f"/v1/agents/{agent['id']}/versions/latest/invoke"
        fake_openai.script_reply("Noted: your bike is blue.")
        api.post(url, headers=headers, json={"messages": [{"role": "user", "content": "my bike is blue"}]})
        api.post(url, headers=headers, json={"messages": [{"role": "user", "content": "what colour?"}]})
        assert "Noted: your bike is blue." in str(fake_openai.chat_requests()[-1]["body"]["messages"])
        time.sleep(1.3)  # past SWITCHBOARD_INACTIVITY_TIMEOUT_S: the next call starts a new conversation
        api.post(url, headers=headers, json={"messages": [{"role": "user", "content": "what colour?"}]})
        assert "blue" not in str(fake_openai.chat_requests()[-1]["body"]["messages"])

"""What OpenAI clients see when something is wrong: OpenAI's error shape through the real ``openai``
SDK, a key checked before any agent is looked up, refused fields named, a bad ``stream_options``
that keeps the connection, ``GET /v1/models/{id}``, and a model server that refuses the connection."""

from __future__ import annotations

import http.client
import json
import socket
import time
from urllib.parse import urlsplit

import httpx
import openai
import pytest

from tests.gateway.agents.conftest import key_for, make_agent

HI = [{"role": "user", "content": "hi"}]


def _client(gateway, key: str, **options) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key, **{"max_retries": 0, **options})


def test_the_openai_client_shows_our_error_messages(api, gateway):
    agent = make_agent(api, "bikes")
    other = make_agent(api, "not-yours")
    client = _client(gateway, key_for(api, agent["id"]))
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="nope", messages=HI)
    assert "no agent named 'nope'" in str(missing.value)
    assert missing.value.body["message"].startswith("no agent named 'nope'")
    assert missing.value.code == "model_not_found" and missing.value.param == "model"
    with pytest.raises(openai.NotFoundError) as not_yours:  # as unknown as a missing one
        client.chat.completions.create(model="not-yours", messages=HI)
    assert not_yours.value.body["message"].startswith("no agent named 'not-yours'")
    assert other["id"] not in str(not_yours.value.body)


def test_a_model_is_retrieved_by_its_id(api, gateway):
    agent = make_agent(api, "bikes")
    client = _client(gateway, key_for(api, agent["id"]))
    retrieved = client.models.retrieve("bikes")
    assert retrieved.id == "bikes" and retrieved.owned_by == "switchboard"
    assert client.models.retrieve(f"bikes@{agent['version_id']}").id == f"bikes@{agent['version_id']}"
    with pytest.raises(openai.NotFoundError) as unknown_model:
        client.models.retrieve("nope")
    assert "no agent named 'nope'" in unknown_model.value.message


def test_tools_and_response_format_are_refused_by_name(api, gateway, fake_openai):
    agent = make_agent(api, "bikes")
    client = _client(gateway, key_for(api, agent["id"]))
    asked = len(fake_openai.chat_requests())
    with pytest.raises(openai.BadRequestError) as tools:
        client.chat.completions.create(model="bikes", messages=HI, tools=[{"type": "function", "function": {
            "name": "lookup", "parameters": {"type": "object", "properties": {}}}}])
    assert tools.value.param == "tools" and "tools: not supported" in tools.value.message
    with pytest.raises(openai.BadRequestError) as json_mode:
        client.chat.completions.create(model="bikes", messages=HI, response_format={"type": "json_object"})
    assert json_mode.value.param == "response_format"
    assert len(fake_openai.chat_requests()) == asked  # nothing reached the model


def test_without_a_valid_key_agent_names_stay_unknown(api, gateway):
    make_agent(api, "real-agent")
    for key in ("", "sbk_not-a-key"):
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        answers = [httpx.post(f"{gateway.url}/v1/chat/completions", headers=headers,
                              json={"model": model, "messages": HI}) for model in ("real-agent", "no-such-agent")]
        assert answers[0].status_code == answers[1].status_code == 401
        assert answers[0].json() == answers[1].json()
        assert "agent" not in answers[0].json()["error"]["message"]


def test_a_bad_stream_field_is_a_400_and_the_connection_stays_open(api, gateway, fake_openai):
    agent = make_agent(api, "sse")
    key = key_for(api, agent["id"])
    where = urlsplit(gateway.url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=10)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    connection.request("POST", "/v1/chat/completions", headers=headers, body=json.dumps(
        {"model": "sse", "stream": True, "stream_options": "yes", "messages": HI}))
    answer = connection.getresponse()
    error = json.loads(answer.read())["error"]
    assert answer.status == 400 and error["param"] == "stream_options" and error["type"] == "invalid_request_error"
    first_socket = connection.sock
    assert first_socket is not None  # not closed by the server
    connection.request("GET", "/v1/models", headers=headers)
    answer = connection.getresponse()
    assert answer.status == 200 and [m["id"] for m in json.loads(answer.read())["data"]] == ["sse"]
    assert connection.sock is first_socket  # the same keep-alive connection answered both
    connection.close()


def test_stream_must_be_a_boolean(api, fake_openai):
    agent = make_agent(api, "strict")
    auth = {"Authorization": f"Bearer {key_for(api, agent['id'])}"}
    asked = len(fake_openai.chat_requests())
    answer = api.post("/v1/chat/completions", headers=auth, json={"model": "strict", "stream": "no", "messages": HI})
    assert answer.status_code == 400 and answer.headers["content-type"] == "application/json"  # not streamed
    assert answer.json()["error"]["param"] == "stream"
    assert len(fake_openai.chat_requests()) == asked


def test_a_model_server_that_refuses_the_connection_is_reported_at_once(api, settings, fake_openai):
    from gateway.http.app import create_app
    from tests.fakes.live_server import LiveServer

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections to it are refused
    down = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
    try:
        with LiveServer(create_app(settings.model_copy(update={"llm_base_url": down, "llm_max_retries": 2}))) as server:
            with httpx.Client(base_url=server.url, timeout=20) as admin:
                agent = make_agent(admin, "offline")
                key = key_for(admin, agent["id"])
            client = _client(server, key, max_retries=2)  # the SDK's default retries
            started = time.perf_counter()
            with pytest.raises(openai.InternalServerError) as refused:
                client.chat.completions.create(model="offline", messages=HI)
            elapsed = time.perf_counter() - started
    finally:
        closed.close()
    assert refused.value.status_code == 502 and refused.value.code == "upstream_refused"
    assert f"the language model at {down} refused the connection" in refused.value.message
    assert elapsed < 0.5, elapsed  # no back-off on either side

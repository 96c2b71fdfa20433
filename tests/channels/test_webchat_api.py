"""Web chat over HTTP against a live gateway, the fake OpenAI server behind it."""

from __future__ import annotations

import httpx
import pytest

from tests.inspect import read_trace


@pytest.fixture
def client(gateway):
    with httpx.Client(base_url=gateway.url, timeout=10) as c:
        yield c


@pytest.fixture
def session(client):
    body = client.post("/api/chat/sessions").json()
    return body["session_id"], {"Authorization": f"Bearer {body['token']}"}


def _transcript(client, session):
    sid, auth = session
    return client.get(f"/api/chat/sessions/{sid}/messages", headers=auth).json()["messages"]


def test_reply_comes_from_the_llm_and_both_messages_are_stored(client, session, fake_openai, gateway):
    fake_openai.script_reply("We open at 9am.")
    sid, auth = session
    resp = client.post(f"/api/chat/sessions/{sid}/messages", json={"text": "When do you open?"}, headers=auth)
    body = resp.json()
    assert body["reply"]["text"] == "We open at 9am."
    sent = fake_openai.chat_requests()[-1]["body"]["messages"]
    assert sent[0]["role"] == "system" and "No additional information" in sent[0]["content"]
    assert sent[-1] == {"role": "user", "content": "When do you open?"}
    assert [(m["role"], m["text"]) for m in _transcript(client, session)] == [
        ("user", "When do you open?"), ("agent", "We open at 9am.")]


def test_trace_records_stages_prompt_model_and_usage(client, session, fake_openai, gateway):
    sid, auth = session
    turn_id = client.post(f"/api/chat/sessions/{sid}/messages", json={"text": "hi"}, headers=auth).json()["turn_id"]
    trace = read_trace(gateway.services, turn_id)
    assert trace.model == gateway.services.settings.llm_model
    assert trace.usage.prompt_tokens == 11
    assert [s.stage for s in trace.stages][:3] == ["accept", "lock_wait", "memory"]
    assert {"prompt", "llm", "deliver"} <= {s.stage for s in trace.stages}
    assert trace.prompt[-1].content == "hi" and trace.reply == "echo: hi"


def test_memory_carries_earlier_turns_into_the_prompt(client, session, fake_openai):
    sid, auth = session
    client.post(f"/api/chat/sessions/{sid}/messages", json={"text": "My name is Ada."}, headers=auth)
    client.post(f"/api/chat/sessions/{sid}/messages", json={"text": "What is my name?"}, headers=auth)
    sent = fake_openai.chat_requests()[-1]["body"]["messages"]
    assert [m["content"] for m in sent[1:]] == ["My name is Ada.", "echo: My name is Ada.", "What is my name?"]


@pytest.mark.parametrize(
    ("body", "status", "kind"),
    [
        ({"text": ""}, 422, "invalid_input"),
        ({"text": "   \n\t"}, 422, "invalid_input"),
        ({"text": "x" * 4001}, 413, "payload_too_large"),
        ({"txt": "hello"}, 422, "invalid_input"),
    ],
)
def test_bad_text_is_refused_and_nothing_is_stored(client, session, fake_openai, body, status, kind):
    sid, auth = session
    resp = client.post(f"/api/chat/sessions/{sid}/messages", json=body, headers=auth)
    assert (resp.status_code, resp.json()["error"], resp.json()["status"]) == (status, kind, status)
    assert resp.json()["message"]
    assert _transcript(client, session) == []
    assert fake_openai.chat_requests() == []


def test_malformed_json_is_400(client, session):
    sid, auth = session
    resp = client.post(f"/api/chat/sessions/{sid}/messages", content=b'{"text": ',
                       headers={**auth, "content-type": "application/json"})
    assert resp.status_code == 400 and resp.json()["error"] == "bad_request"
    assert _transcript(client, session) == []


def test_unknown_session_missing_and_wrong_token(client, session):
    sid, auth = session
    unknown = client.post("/api/chat/sessions/" + "0" * 32 + "/messages", json={"text": "hi"}, headers=auth)
    assert unknown.status_code == 404 and unknown.json()["error"] == "not_found"
    missing = client.post(f"/api/chat/sessions/{sid}/messages", json={"text": "hi"})
    assert missing.status_code == 401 and missing.json()["error"] == "unauthorized"
    wrong = client.post(f"/api/chat/sessions/{sid}/messages", json={"text": "hi"},
                        headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert _transcript(client, session) == []


def test_duplicate_client_message_id_gets_no_second_reply(client, session, fake_openai):
    sid, auth = session
    first = client.post(f"/api/chat/sessions/{sid}/messages", json={"text": "hi", "client_message_id": "m1"},
                        headers=auth)
    again = client.post(f"/api/chat/sessions/{sid}/messages", json={"text": "hi", "client_message_id": "m1"},
                        headers=auth)
    assert first.status_code == 200 and again.status_code == 409
    assert len(fake_openai.chat_requests()) == 1
    assert len(_transcript(client, session)) == 2


def test_llm_failure_answers_with_the_fallback_and_records_the_error(client, session, fake_openai, gateway):
    fake_openai.fail_next(500)
    sid, auth = session
    resp = client.post(f"/api/chat/sessions/{sid}/messages", json={"text": "hi"}, headers=auth)
    assert resp.status_code == 200
    assert resp.json()["reply"]["text"] == gateway.services.settings.llm_fallback_message
    trace = read_trace(gateway.services, resp.json()["turn_id"])
    assert trace.responder == "fallback" and "InternalServerError" in trace.error
    metrics = client.get("/metrics").text
    assert 'switchboard_llm_errors_total{kind="InternalServerError"} 1.0' in metrics

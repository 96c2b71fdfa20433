"""One bad character never takes the agent down: text that cannot be encoded is refused at the API,
repaired where it comes from elsewhere (stored earlier, a data source), and never leaks a turn ticket."""

from __future__ import annotations

import time

import httpx
import pytest
import redis
from redis.exceptions import ResponseError

from gateway.core.models import InboundMessage
from tests.inspect import read_persona_messages
from tests.sinks import RecordingSink as Sink

ADMIN = {"Authorization": "Bearer admin-secret"}
BUSINESS = "project_attributes_setting_business_name"


def _message(i: int, text: str = "hello") -> InboundMessage:
    return InboundMessage(channel="test", external_user_id="u9", external_message_id=f"m{i}",
                          identity="test:u9", text=text)


@pytest.fixture
def client(gateway):
    with httpx.Client(base_url=gateway.url, timeout=20) as c:
        yield c


def _session(client):
    body = client.post("/api/chat/sessions").json()
    return body["session_id"], {"Authorization": f"Bearer {body['token']}", "Content-Type": "application/json"}


def test_a_value_stored_with_a_lone_surrogate_breaks_no_turn(client, gateway, fake_openai):
    # As an earlier version stored it: json.dumps keeps the surrogate as an escape.
    services = gateway.services
    raw_redis = redis.Redis.from_url(services.settings.redis_url)
    raw_redis.hset(services.store.key("customer", "attrs"), BUSINESS, '"Harbor \\ud800 Bikes"')
    sid, auth = _session(client)
    resp = client.post(f"/api/chat/sessions/{sid}/messages", json={"text": "hi"}, headers=auth)
    assert resp.status_code == 200, resp.text
    assert resp.json()["reply"]["text"] == "echo: hi"
    system = fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]
    assert "Harbor \ufffd Bikes" in system
    listing = client.get("/api/attributes", headers=ADMIN)
    assert listing.status_code == 200, listing.text
    preview = client.post("/api/prompt/preview", json={"text": "hi"}, headers=ADMIN)
    assert preview.status_code == 200 and "Harbor \ufffd Bikes" in preview.json()["messages"][0]["content"]


def test_a_web_chat_message_with_a_lone_surrogate_is_refused_and_costs_the_next_one_nothing(client, gateway):
    sid, auth = _session(client)
    for _ in range(3):
        bad = client.post(f"/api/chat/sessions/{sid}/messages", content=b'{"text": "\\ud800 hi"}', headers=auth)
        assert bad.status_code == 400, bad.text
        assert bad.json()["error"] == "bad_request" and "surrogate" in bad.json()["message"]
    t0 = time.monotonic()
    good = client.post(f"/api/chat/sessions/{sid}/messages", json={"text": "still there?"}, headers=auth)
    assert good.status_code == 200 and good.json()["reply"]["text"] == "echo: still there?"
    assert time.monotonic() - t0 < 3, "a refused message held up the conversation's next turn"
    transcript = client.get(f"/api/chat/sessions/{sid}/messages", headers=auth).json()["messages"]
    assert [m["text"] for m in transcript] == ["still there?", "echo: still there?"]


async def test_a_message_that_fails_to_store_does_not_hold_up_the_next_turn(services):
    persona = await services.store.resolve_persona("test:u9")
    messages_key = services.store.key("persona", persona.id, "msgs")
    await services.redis.set(messages_key, "not a sorted set")  # the store refuses the write
    with pytest.raises(ResponseError):
        await services.pipeline.accept(_message(1))
    await services.redis.delete(messages_key)
    turn = await services.pipeline.accept(_message(2, "second"))
    sink = Sink()
    t0 = time.monotonic()
    await services.pipeline.run(turn, sink)
    assert time.monotonic() - t0 < 3, "the failed message's turn ticket held up the next turn"
    assert sink.sent == ["echo: second"]
    again = await services.pipeline.accept(_message(1, "first, resent"))  # its claim was released
    assert again is not None


async def test_data_from_a_source_with_a_lone_surrogate_is_repaired(services, fake_openai):
    await services.live.data_injection.retrieve({"text": "price list \ud800 today"})
    turn = await services.pipeline.accept(_message(3, "prices?"))
    sink = Sink()
    outcome = await services.pipeline.run(turn, sink)
    assert sink.sent == ["echo: prices?"] and outcome.reply.responder == "llm"
    system = fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]
    assert "price list \ufffd today" in system
    stored = read_persona_messages(services, turn.persona.id)
    assert [m.text for m in stored] == ["prices?", "echo: prices?"]


async def test_vendor_text_and_llm_output_with_lone_surrogates_are_repaired(services, fake_openai):
    fake_openai.script_raw('{"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": '
                           '[{"index": 0, "message": {"role": "assistant", "content": "ok \\udc00 then"}}]}')
    turn = await services.pipeline.accept(_message(4, "cut emoji \ud83d"))
    sink = Sink()
    await services.pipeline.run(turn, sink)
    assert sink.sent == ["ok \ufffd then"]
    stored = read_persona_messages(services, turn.persona.id)
    assert [m.text for m in stored] == ["cut emoji \ufffd", "ok \ufffd then"]

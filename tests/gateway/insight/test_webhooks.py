"""Event webhooks against a live gateway and a real receiver on 127.0.0.1: the CRUD API (secrets encrypted
and masked), and the done-when of issue 41 shortened: a receiver that is down for a few seconds, then up,
gets every event once, in order per conversation, each signature valid, with the failed attempts logged."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.http.app import create_app
from gateway.insight.signature import HEADER, verify
from tests.channels.conftest import wait_until
from tests.fakes.live_server import LiveServer, free_port
from tests.gateway.insight.test_insights_api import ADMIN, Visitor

ALL_EVENTS = ["conversation.handoff_requested", "message.feedback", "conversation.resolved",
              "conversation.unanswered", "tool.failed"]
SECRET = "whsec_test_secret_0123456789"


class Receiver:
    """Records every delivery: its headers and raw body."""

    def __init__(self) -> None:
        self.received: list[tuple[dict, bytes]] = []
        self.lock = threading.Lock()

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            body = await request.body()
            with self.lock:
                self.received.append((dict(request.headers), body))
            return Response(status_code=204)

        return Starlette(routes=[Route("/hook", hook, methods=["POST"])])

    def events(self) -> list[dict]:
        with self.lock:
            return [json.loads(body) for _, body in self.received]


@pytest.fixture
def gateway(settings) -> Iterator[tuple[httpx.Client, object]]:
    tuned = settings.model_copy(update={"outbound_allow_hosts": "127.0.0.1", "webhook_backoff_first_s": 0.2,
                                        "webhook_backoff_max_s": 1.0, "webhook_timeout_s": 2.0,
                                        "secret_key": SecretStr(Fernet.generate_key().decode())})
    with LiveServer(create_app(tuned)) as server, httpx.Client(base_url=server.url, timeout=20) as client:
        yield client, server.server.config.app.state.services


def test_webhook_crud_keeps_the_secret_encrypted_and_masked(gateway):
    api, services = gateway
    refused = api.post("/api/webhooks", headers=ADMIN, json={"url": "http://10.0.0.5/hook", "events": ALL_EVENTS})
    assert refused.status_code == 422 and "10.0.0.5" in refused.json()["message"]  # the outbound guard
    bad = api.post("/api/webhooks", headers=ADMIN, json={"url": "http://127.0.0.1:9/h", "events": ["nope"]})
    assert bad.status_code == 422
    assert api.post("/api/webhooks", json={"url": "http://127.0.0.1:9/h", "events": ALL_EVENTS}).status_code == 401

    made = api.post("/api/webhooks", headers=ADMIN,
                    json={"url": "http://127.0.0.1:9/h", "events": ["message.feedback"], "secret": SECRET}).json()
    assert made.get("secret") == "whsec_…6789" and "secret_shown_once" not in made, made
    generated = api.post("/api/webhooks", headers=ADMIN,
                         json={"url": "http://127.0.0.1:9/g", "events": ["tool.failed"]}).json()
    assert generated["secret_shown_once"] and generated["secret"].startswith("whsec_") and len(generated["secret"]) > 30
    stored = services.redis_sync.hgetall(services.insight.webhooks.endpoints_key)
    assert len(stored) == 2 and not any(SECRET.encode() in v or generated["secret"].encode() in v
                                        for v in stored.values())

    listed = api.get("/api/webhooks", headers=ADMIN).json()
    assert [w["id"] for w in listed["webhooks"]] == [made["id"], generated["id"]]
    assert all("…" in w["secret"] for w in listed["webhooks"]) and listed["events"] == ALL_EVENTS
    patched = api.patch(f"/api/webhooks/{made['id']}", headers=ADMIN,
                        json={"events": ["conversation.resolved", "tool.failed"], "enabled": False}).json()
    assert patched["events"] == ["conversation.resolved", "tool.failed"] and patched["enabled"] is False
    assert api.get(f"/api/webhooks/{made['id']}", headers=ADMIN).json()["events"] == patched["events"]
    assert api.delete(f"/api/webhooks/{made['id']}", headers=ADMIN).json()["deleted"] is True
    assert api.get(f"/api/webhooks/{made['id']}", headers=ADMIN).status_code == 404
    assert api.get(f"/api/webhooks/{made['id']}/deliveries", headers=ADMIN).status_code == 404


def test_a_receiver_down_then_up_gets_every_event_once_in_order_and_signed(gateway, fake_openai):
    api, _ = gateway
    receiver, port = Receiver(), free_port()
    hook = api.post("/api/webhooks", headers=ADMIN, json={"url": f"http://127.0.0.1:{port}/hook",
                                                          "events": ALL_EVENTS, "secret": SECRET}).json()
    # The receiver is down (nothing listens on its port) while two conversations make events, interleaved.
    expected: dict[str, list[tuple[str, str]]] = {}
    visitors = [Visitor(api), Visitor(api)]
    for round_ in range(3):
        for n, visitor in enumerate(visitors):
            fake_openai.script_reply(f"Sorry, I don't know that ({round_}, {n}).")
            reply = visitor.say(f"question {round_} from {n}")
            conversation = reply["conversation_id"]
            expected.setdefault(conversation, []).append(("conversation.unanswered", f"question {round_} from {n}"))
            rating = "down" if round_ % 2 else "up"
            assert visitor.rate(reply, rating).status_code == 200
            expected[conversation].append(("message.feedback", reply["message_id"] + rating))
    first_conversation = next(iter(expected))  # the first visitor's
    visitors[0].say("Let me talk to a human please")
    expected[first_conversation].append(("conversation.handoff_requested", "the user asked for a person"))
    deliveries = f"/api/webhooks/{hook['id']}/deliveries"
    log = wait_until(lambda: (d := api.get(deliveries, headers=ADMIN).json())["attempts"] and d, 30, "a failed attempt")
    assert log["attempts"][0]["status"] == "failed" and log["attempts"][0]["http_status"] is None
    time.sleep(3)  # down a little longer: several attempts of the oldest event fail
    assert receiver.events() == []
    total = sum(len(v) for v in expected.values())
    assert api.get(deliveries, headers=ADMIN).json()["waiting"] == total

    with LiveServer(receiver.app(), port=port):
        wait_until(lambda: len(receiver.events()) >= total, 30, "every event")
        time.sleep(1.5)  # anything sent twice would have arrived by now
    events = receiver.events()
    assert len(events) == total and len({e["id"] for e in events}) == total  # each once
    for headers, body in receiver.received:
        assert verify(SECRET, body, headers[HEADER.lower()]), headers[HEADER.lower()]
        assert not verify("another-secret-000000", body, headers[HEADER.lower()])
        assert headers["x-switchboard-event"] == json.loads(body)["type"]
    for conversation, wanted in expected.items():
        got = []
        for event in events:
            if event["conversation_id"] != conversation:
                continue
            data = event["data"]
            key = {"conversation.unanswered": lambda d: d["question"],
                   "message.feedback": lambda d: d["message_id"] + d["rating"],
                   "conversation.handoff_requested": lambda d: d["reason"]}[event["type"]](data)
            got.append((event["type"], key))
        assert got == wanted, conversation
    log = api.get(deliveries, headers=ADMIN).json()
    assert log["waiting"] == 0
    statuses = [a["status"] for a in log["attempts"]]
    assert statuses.count("delivered") == total and "failed" in statuses

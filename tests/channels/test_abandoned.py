"""The abandoned outcome: a web-chat visitor who closes the page while the reply is still streaming has left
mid-answer; the reply is finished and stored all the same, and the conversation counts as abandoned (once).
A visitor who stays to the end does not."""

from __future__ import annotations

import json

import httpx
from websockets.sync.client import connect

from tests.channels.conftest import wait_until

ADMIN = {"Authorization": "Bearer admin-secret"}
REPLY = "Our shop opens at nine every weekday, and at ten on Saturdays and Sundays."


def _chat(gateway) -> tuple[dict, str]:
    chat = httpx.post(f"{gateway.url}/api/chat/sessions").json()
    return chat, f"ws://127.0.0.1:{gateway.port}/api/chat/sessions/{chat['session_id']}/ws?token={chat['token']}"


def _report(gateway) -> dict:
    return httpx.get(f"{gateway.url}/api/insights", headers=ADMIN).json()


def test_a_visitor_who_leaves_mid_stream_is_counted_abandoned(gateway, fake_openai):
    fake_openai.chunk_delay_s = 0.05  # about a second of streaming
    fake_openai.script_reply(REPLY)
    chat, url = _chat(gateway)
    with connect(url) as ws:
        ws.send(json.dumps({"text": "When do you open?"}))
        assert json.loads(ws.recv(timeout=10))["type"] == "delta"
    # the page is gone; the reply still finishes and is stored
    wait_until(lambda: _report(gateway)["turns"] == 1, what="the turn finished")
    assert _report(gateway)["abandoned"] == 1
    transcript = httpx.get(f"{gateway.url}/api/chat/sessions/{chat['session_id']}/messages",
                           headers={"Authorization": f"Bearer {chat['token']}"}).json()
    assert [m["text"] for m in transcript["messages"] if m["role"] == "agent"][-1] == REPLY

    # a visitor who reads to the end has not abandoned the conversation
    fake_openai.chunk_delay_s = 0.0
    fake_openai.script_reply("Yes.")
    _, url = _chat(gateway)
    with connect(url) as ws:
        ws.send(json.dumps({"text": "Open on Sundays?"}))
        while json.loads(ws.recv(timeout=10))["type"] == "delta":
            pass
    wait_until(lambda: _report(gateway)["turns"] == 2, what="the second turn")
    assert _report(gateway)["abandoned"] == 1

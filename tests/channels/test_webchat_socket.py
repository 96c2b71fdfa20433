"""Streaming over the web-chat WebSocket, through the real openai client's streaming path."""

from __future__ import annotations

import json

import httpx
import pytest
from websockets.sync.client import connect


@pytest.fixture
def chat(gateway):
    body = httpx.post(f"{gateway.url}/api/chat/sessions").json()
    return body


def test_socket_streams_deltas_then_the_final_message(gateway, chat, fake_openai):
    fake_openai.script_reply("Our shop opens at nine every weekday.")
    url = f"ws://127.0.0.1:{gateway.port}/api/chat/sessions/{chat['session_id']}/ws?token={chat['token']}"
    with connect(url) as ws:
        ws.send(json.dumps({"text": "When do you open?"}))
        frames = []
        while True:
            frame = json.loads(ws.recv(timeout=10))
            frames.append(frame)
            if frame["type"] != "delta":
                break
    deltas = [f["text"] for f in frames if f["type"] == "delta"]
    assert len(deltas) > 3, "the reply should arrive in pieces"
    assert "".join(deltas) == "Our shop opens at nine every weekday."
    assert frames[-1]["type"] == "message"
    assert frames[-1]["reply"]["text"] == "Our shop opens at nine every weekday."
    assert fake_openai.chat_requests()[0]["body"]["stream"] is True


def test_socket_reports_bad_input_and_stays_open(gateway, chat, fake_openai):
    url = f"ws://127.0.0.1:{gateway.port}/api/chat/sessions/{chat['session_id']}/ws?token={chat['token']}"
    with connect(url) as ws:
        ws.send("not json")
        assert json.loads(ws.recv(timeout=5))["status"] == 400
        ws.send(json.dumps({"text": "   "}))
        assert json.loads(ws.recv(timeout=5)) == {
            "type": "error", "status": 422, "error": "invalid_input", "message": "text: must not be empty"}
        ws.send(json.dumps({"text": "still there?"}))
        frames = [json.loads(ws.recv(timeout=5))]
        while frames[-1]["type"] == "delta":
            frames.append(json.loads(ws.recv(timeout=5)))
        assert frames[-1]["reply"]["text"] == "echo: still there?"
    assert len(fake_openai.chat_requests()) == 1


def test_socket_with_a_wrong_token_is_closed(gateway, chat):
    from websockets.exceptions import ConnectionClosed, InvalidStatus

    url = f"ws://127.0.0.1:{gateway.port}/api/chat/sessions/{chat['session_id']}/ws?token=wrong"
    with pytest.raises((ConnectionClosed, InvalidStatus)):
        with connect(url) as ws:
            ws.recv(timeout=5)

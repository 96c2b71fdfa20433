"""Tools on a phone call (Twilio ConversationRelay): a tool that takes 2 s makes the caller hear a short
filler once, before the answer, instead of silence; a quick tool makes none."""

from __future__ import annotations

import httpx
import pytest

from tests.channels.relay_client import prompt, setup, socket, tokens
from tests.fakes.live_server import LiveServer
from tests.fakes.mcp_server import FakeMcpServer

ADMIN = {"Authorization": "Bearer admin-secret"}


@pytest.fixture
def channel_overrides() -> dict:
    return {"twilio_voice_mode": "relay", "outbound_allow_hosts": "127.0.0.1", "retrieval_strategy": "hybrid"}


@pytest.fixture
def crm():
    fake = FakeMcpServer()
    with LiveServer(fake.app(), graceful_timeout_s=1) as server:
        fake.url = server.url + "/mcp"
        yield fake


def _give_tools(client: httpx.Client, url: str, agent_id: str) -> None:
    added = client.post("/api/tool-sources", headers=ADMIN, json={"name": "crm", "url": url})
    assert added.status_code == 201 and added.json()["tools"], added.text
    patched = client.patch(f"/v1/agents/{agent_id}", headers=ADMIN,
                           json={"config": {"tools": [{"name": "crm.lookup_order"}]}})
    assert patched.status_code == 200, patched.text


def test_a_slow_tool_makes_the_caller_hear_a_filler_once_before_the_answer(live, client, crm, fake_openai,
                                                                            channel_settings):
    _give_tools(client, crm.url, channel_settings.agent_id)
    crm.hang_s = 2.0
    fake_openai.echo_tool_results = True
    fake_openai.script_tool_calls(("crm__lookup_order", {"order": "4411"}), ("crm__lookup_order", {"order": "4412"}))
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "Where are my orders 4411 and 4412?")
        got = [message for _, message in tokens(ws, timeout=30)]

    texts = [m["token"] for m in got if m.get("type") == "text"]
    assert texts[0] == "One moment while I check. "  # first, while the two calls run
    assert texts.count("One moment while I check. ") == 1  # once, though two calls ran long
    answer = "".join(texts[1:])
    assert "Order 4411: shipped" in answer and "Order 4412: shipped" in answer
    assert got[-1]["last"] is True
    assert len(crm.calls) == 2


def test_a_quick_tool_makes_no_filler(live, client, crm, fake_openai, channel_settings):
    _give_tools(client, crm.url, channel_settings.agent_id)
    fake_openai.echo_tool_results = True
    fake_openai.script_tool_calls(("crm__lookup_order", {"order": "4411"}))
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "Where is my order 4411?")
        got = [message for _, message in tokens(ws, timeout=30)]

    texts = [m["token"] for m in got if m.get("type") == "text"]
    assert "One moment while I check. " not in texts
    assert "Order 4411: shipped" in "".join(texts)

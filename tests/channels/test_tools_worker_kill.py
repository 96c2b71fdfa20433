"""Exactly once across a SIGKILL: a `switchboard worker` process killed after its turn's tool call (the
result journalled, the model writing its second round) is taken over by the next worker, which resumes the
turn from the journal: the MCP server is called once, Telegram gets one reply, carrying the result."""

from __future__ import annotations

import signal

import httpx
import pytest

from gateway.core.models import Role
from gateway.http.app import create_app
from tests.channels import vendors
from tests.channels.conftest import Stored, wait_until
from tests.fakes import telegram_api
from tests.fakes.live_server import LiveServer
from tests.fakes.mcp_server import FakeMcpServer
from tests.redis_servers import embedded_redis, redis_url  # noqa: F401 - fixtures: both servers
from tests.workers import start_worker, stop_workers

ADMIN = {"Authorization": "Bearer admin-secret"}


@pytest.fixture
def acks_only(channel_overrides):
    channel_overrides["inbox_consumer"] = False
    channel_overrides["outbound_allow_hosts"] = "127.0.0.1"


def _worker(settings, fake_telegram, fake_openai, data_dir):
    return start_worker({
        "SWITCHBOARD_REDIS_URL": settings.redis_url, "SWITCHBOARD_AGENT_ID": settings.agent_id,
        "SWITCHBOARD_DATA_DIR": str(data_dir), "SWITCHBOARD_QDRANT_URL": ":memory:",
        "SWITCHBOARD_EMBEDDINGS": "none", "SWITCHBOARD_LLM_BASE_URL": fake_openai.url,
        "SWITCHBOARD_LLM_API_KEY": "sk-test", "SWITCHBOARD_LLM_MAX_RETRIES": "0", "SWITCHBOARD_LLM_TIMEOUT_S": "120",
        "SWITCHBOARD_TURN_DEADLINE_S": "120", "SWITCHBOARD_OUTBOUND_ALLOW_HOSTS": "127.0.0.1",
        "SWITCHBOARD_TELEGRAM_BOT_TOKEN": telegram_api.TOKEN,
        "SWITCHBOARD_TELEGRAM_WEBHOOK_SECRET": vendors.TELEGRAM_SECRET,
        "SWITCHBOARD_TELEGRAM_API_BASE": fake_telegram.url, "SWITCHBOARD_INBOX_RECLAIM_S": "1",
        "SWITCHBOARD_TURN_DRAIN_TIMEOUT_S": "2", "SWITCHBOARD_LOG_LEVEL": "WARNING",
    })


def test_a_worker_killed_after_the_tool_call_books_once_and_replies_once(acks_only, channel_settings, fake_telegram,
                                                                          fake_openai, tmp_path):
    crm = FakeMcpServer()
    fake_openai.auto_tool_call = ("crm__book_table", {"party_size": 4, "day": "Friday"})
    fake_openai.echo_tool_results, fake_openai.tool_result_delay_s = True, 60  # the second round hangs
    identity = f"telegram:{vendors.USER_ID}"
    first = second = None
    with LiveServer(crm.app(), graceful_timeout_s=1) as tools, LiveServer(create_app(channel_settings)) as gateway:
        gateway.services = gateway.server.config.app.state.services
        stored = Stored(gateway)
        with httpx.Client(base_url=gateway.url, timeout=30) as client:
            added = client.post("/api/tool-sources", headers=ADMIN, json={"name": "crm", "url": tools.url + "/mcp"})
            assert added.status_code == 201 and added.json()["tools"], added.text
            assert client.patch(f"/v1/agents/{channel_settings.agent_id}", headers=ADMIN, json={
                "config": {"tools": [{"name": "crm.book_table"}]}}).status_code == 200
            update = vendors.telegram_update(vendors.telegram_message("Book a table for four on Friday"))
            assert vendors.post_telegram(client, update).json() == {"ok": True}
        try:
            first = _worker(channel_settings, fake_telegram, fake_openai, tmp_path / "w1")
            # the tool was called and the model is writing its second round: the result is journalled by then
            wait_until(lambda: len(fake_openai.chat_requests()) == 2, 90, "the first worker's second model round")
            assert len(crm.calls) == 1
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            fake_openai.tool_result_delay_s = 0
            second = _worker(channel_settings, fake_telegram, fake_openai, tmp_path / "w2")
            wait_until(lambda: fake_telegram.sent_texts(), 90, "the second worker's reply")
            wait_until(lambda: len(stored.messages(identity)) == 2, 30, "the second worker's turn to close")
        finally:
            stop_workers(first, second)
        messages = stored.messages(identity)
    booked = "From the tools: Booked: a table for 4 on Friday, reference BK-1001."
    assert len(crm.calls) == 1  # booked once
    assert fake_telegram.sent_texts() == [booked]  # replied once
    assert [(m.role, m.text) for m in messages] == [(Role.USER, "Book a table for four on Friday"),
                                                    (Role.AGENT, booked)]
    requests = fake_openai.chat_requests()
    assert len(requests) == 3  # the resumed turn went on from the journal: no new first round
    assert [m["content"] for m in requests[2]["body"]["messages"] if m["role"] == "tool"] == [booked[16:]]

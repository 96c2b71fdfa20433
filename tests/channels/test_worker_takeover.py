"""The production split: the gateway only acknowledges, `switchboard worker` processes run the turns.

A worker killed (SIGKILL) in the middle of a turn loses nothing: the next worker claims the
delivery, resumes the turn it had accepted (the user message is not stored twice) and replies once.
"""

from __future__ import annotations

import signal
import subprocess

import httpx
import pytest

from gateway.core.models import Role
from gateway.http.app import create_app
from tests.channels import vendors
from tests.channels.conftest import Stored, wait_until
from tests.fakes import telegram_api
from tests.fakes.live_server import LiveServer
from tests.redis_servers import embedded_redis, redis_url  # noqa: F401 - fixtures: both servers
from tests.workers import start_worker, stop_workers


@pytest.fixture
def acks_only(channel_overrides):
    channel_overrides["inbox_consumer"] = False


def _worker(settings, fake_telegram, fake_openai, data_dir) -> subprocess.Popen:
    return start_worker({
        "SWITCHBOARD_REDIS_URL": settings.redis_url,
        "SWITCHBOARD_AGENT_ID": settings.agent_id,
        "SWITCHBOARD_DATA_DIR": str(data_dir),
        "SWITCHBOARD_QDRANT_URL": ":memory:",
        "SWITCHBOARD_EMBEDDINGS": "none",
        "SWITCHBOARD_LLM_BASE_URL": fake_openai.url,
        "SWITCHBOARD_LLM_API_KEY": "sk-test",
        "SWITCHBOARD_LLM_MAX_RETRIES": "0",
        "SWITCHBOARD_LLM_TIMEOUT_S": "120",
        "SWITCHBOARD_TELEGRAM_BOT_TOKEN": telegram_api.TOKEN,
        "SWITCHBOARD_TELEGRAM_WEBHOOK_SECRET": vendors.TELEGRAM_SECRET,
        "SWITCHBOARD_TELEGRAM_API_BASE": fake_telegram.url,
        "SWITCHBOARD_INBOX_RECLAIM_S": "1",
        # The killed worker's turn lock is free once its lease runs out: the next worker waits that long.
        "SWITCHBOARD_TURN_LOCK_LEASE_S": "2",
        "SWITCHBOARD_TURN_DRAIN_TIMEOUT_S": "2",
        "SWITCHBOARD_LOG_LEVEL": "WARNING",
    })


def test_a_worker_killed_mid_turn_is_taken_over_by_the_next(acks_only, channel_settings, fake_telegram,
                                                            fake_openai, tmp_path):
    fake_openai.script_reply("never sent", delay_s=60)
    fake_openai.script_reply("answered by the second worker")
    identity = f"telegram:{vendors.USER_ID}"
    first = second = None
    with LiveServer(create_app(channel_settings)) as gateway:
        gateway.services = gateway.server.config.app.state.services
        stored = Stored(gateway)
        with httpx.Client(base_url=gateway.url, timeout=10) as client:
            update = vendors.telegram_update(vendors.telegram_message("Can I rent a tandem?"))
            assert vendors.post_telegram(client, update).json() == {"ok": True}
        assert stored.messages(identity) == []  # acknowledged and queued; no consumer runs in the gateway
        try:
            first = _worker(channel_settings, fake_telegram, fake_openai, tmp_path / "w1")
            wait_until(lambda: len(fake_openai.chat_requests()) == 1, 60, "the first worker to call the LLM")
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            second = _worker(channel_settings, fake_telegram, fake_openai, tmp_path / "w2")
            wait_until(lambda: fake_telegram.sent_texts() == ["answered by the second worker"], 60,
                       "the second worker to answer")
            # The reply is stored by the turn's closing write, just after it is sent: wait for it as well
            # before stopping the worker (a stop between the two leaves the closing to the next worker).
            wait_until(lambda: len(stored.messages(identity)) == 2, 30, "the second worker's turn to close")
        finally:
            stop_workers(first, second)
        messages = stored.messages(identity)
    assert [(m.role, m.text) for m in messages] == [
        (Role.USER, "Can I rent a tandem?"), (Role.AGENT, "answered by the second worker")
    ]
    assert len(fake_openai.chat_requests()) == 2
    assert fake_telegram.sent_texts() == ["answered by the second worker"]

"""Ack fast, work after: background turns survive a graceful shutdown; one cut off is recorded on its
trace and handed back to the inbox, and the next gateway process finishes it (once)."""

from __future__ import annotations

import pytest

from gateway.core.models import DeliveryStatus, Role
from gateway.http.app import create_app
from tests.channels import vendors
from tests.channels.conftest import Stored, wait_until
from tests.fakes.live_server import LiveServer


def _post_then_stop(channel_settings, text: str) -> LiveServer:
    import httpx

    server = LiveServer(create_app(channel_settings)).start()
    server.services = server.server.config.app.state.services
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message(text))).status_code == 200
    server.stop()
    return server


def test_shutdown_waits_for_the_turn_in_flight(channel_settings, fake_telegram, fake_openai):
    fake_openai.script_reply("finished during shutdown", delay_s=0.6)
    _post_then_stop(channel_settings, "slow question")
    assert fake_telegram.sent_texts() == ["finished during shutdown"]


@pytest.fixture
def short_drain(channel_overrides):
    channel_overrides["turn_drain_timeout_s"] = 0.2


def test_a_turn_cut_off_by_shutdown_is_recorded_then_finished_by_the_next_process(
    short_drain, channel_settings, fake_telegram, fake_openai
):
    fake_openai.script_reply("too late", delay_s=4)
    fake_openai.script_reply("answered after the restart")
    server = _post_then_stop(channel_settings, "very slow question")
    assert fake_telegram.sent_texts() == []
    stored = Stored(server)
    [user] = stored.messages(f"telegram:{vendors.USER_ID}")
    [trace] = stored.traces(user)
    assert trace.user_message_id == user.id and "cancelled at shutdown" in trace.error

    with LiveServer(create_app(channel_settings)):  # takes the handed-back delivery at start-up
        wait_until(lambda: fake_telegram.sent_texts() == ["answered after the restart"], 10, "the resumed reply")
    messages = stored.messages(f"telegram:{vendors.USER_ID}")
    assert [(m.role, m.text) for m in messages] == [
        (Role.USER, "very slow question"), (Role.AGENT, "answered after the restart")
    ]
    assert messages[1].delivery is DeliveryStatus.DELIVERED and messages[0].id == user.id
    assert fake_telegram.sent_texts() == ["answered after the restart"]

"""A Telegram turn whose acknowledgement is lost (the consumer's Redis call fails after the reply went
out) is not answered twice: the consumer that takes the delivery over finds the turn finished."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from channels.registry import install_worker
from gateway.inbox.consumer import InboxConsumer
from gateway.inbox.stream import Delivery, Inbox
from gateway.services import Services
from tests.channels import vendors
from tests.redis_servers import embedded_redis, redis_url  # noqa: F401 - fixtures: both servers


class AckLosingInbox(Inbox):
    """The inbox as seen by a consumer whose connection drops right after its turn finished."""

    async def done(self, delivery: Delivery) -> None:
        raise ConnectionError("connection reset by peer")


async def _until(check, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture
async def services(channel_settings):
    built = Services.build(channel_settings.model_copy(update={"inbox_reclaim_s": 0.3}), consume_inbox=False)
    install_worker(built.channel_context())
    yield built
    await built.aclose()


async def test_a_finished_turn_whose_ack_was_lost_is_not_answered_again(services, fake_telegram, fake_openai):
    fake_openai.script_reply("one answer only")
    update = vendors.telegram_update(vendors.telegram_message("How much is a day rental?"))
    assert await services.inbox.push("telegram", str(update["update_id"]), str(vendors.USER_ID), json.dumps(update))

    losing = InboxConsumer(AckLosingInbox(services.redis, services.store), services.turns, services.settings,
                           services.metrics, handlers=services.inbox_handlers)
    await losing.start()
    await _until(lambda: fake_telegram.sent_texts() == ["one answer only"], 10, "the first reply")
    await _until(lambda: losing.in_flight == 0, 5, "the first consumer to finish")
    await losing.stop()
    assert await services.redis.xlen(services.inbox.stream) == 1  # still there: its ack was lost

    taking_over = InboxConsumer(services.inbox, services.turns, services.settings, services.metrics,
                                handlers=services.inbox_handlers)
    await taking_over.start()
    try:
        await _until(lambda: services.metrics.inbox_reclaimed.labels("telegram")._value.get() == 1, 5,
                     "the delivery to be taken over")
        await _until(lambda: taking_over.in_flight == 0, 5, "the second consumer to finish")
    finally:
        await taking_over.stop()
    assert await services.redis.xlen(services.inbox.stream) == 0
    assert fake_telegram.sent_texts() == ["one answer only"]
    assert len(fake_openai.chat_requests()) == 1

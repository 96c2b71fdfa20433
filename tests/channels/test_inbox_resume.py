"""A Telegram turn whose acknowledgement is lost (the consumer's Redis call fails after the reply went
out) is not answered twice: the consumer that takes the delivery over finds the turn finished."""

from __future__ import annotations

import json

import pytest

from gateway.inbox.consumer import InboxConsumer
from gateway.inbox.stream import Delivery, Inbox
from tests.channels import vendors
from tests.channels.inbox_consumers import build_services, take_over, until
from tests.redis_servers import embedded_redis, redis_url  # noqa: F401 - fixtures: both servers


class AckLosingInbox(Inbox):
    """The inbox as seen by a consumer whose acknowledgement never reaches Redis after its turn finished
    (the ack goes in the turn's closing round trip, or on its own when that is not possible)."""

    def done_into(self, pipe, delivery: Delivery, consumer: str) -> None:
        pass  # lost on the way

    async def done(self, delivery: Delivery, consumer: str | None = None) -> bool:
        raise ConnectionError("connection reset by peer")


@pytest.fixture
async def services(channel_settings):
    built = build_services(channel_settings)
    yield built
    await built.aclose()


async def test_a_finished_turn_whose_ack_was_lost_is_not_answered_again(services, fake_telegram, fake_openai):
    fake_openai.script_reply("one answer only")
    update = vendors.telegram_update(vendors.telegram_message("How much is a day rental?"))
    assert await services.inbox.push("telegram", str(update["update_id"]), str(vendors.USER_ID), json.dumps(update))

    losing = InboxConsumer(AckLosingInbox(services.redis, services.store), services.turns, services.settings,
                           services.metrics, handlers=services.inbox_handlers)
    await losing.start()
    await until(lambda: fake_telegram.sent_texts() == ["one answer only"], 10, "the first reply")
    await until(lambda: losing.in_flight == 0, 5, "the first consumer to finish")
    await losing.stop()
    assert await services.redis.xlen(services.inbox.stream) == 1  # still there: its ack was lost

    await take_over(services)
    assert fake_telegram.sent_texts() == ["one answer only"]
    assert len(fake_openai.chat_requests()) == 1

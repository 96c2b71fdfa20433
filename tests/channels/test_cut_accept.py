"""A delivery whose acceptance is cut off after the user message was stored (Redis drops the connection
before the accepted turn is recorded) is answered when it is tried again, and the user message is stored
once; a second inbox entry for the same message is still a duplicate.

Found by bench/soak.py: a Redis restart in that window left the message claimed, so the retry was taken
for a vendor's redelivery and acknowledged without a reply.
"""

from __future__ import annotations

import json

import pytest

from gateway.inbox.stream import Delivery, Inbox
from gateway.turn.pipeline import Turn
from tests.channels import vendors
from tests.channels.inbox_consumers import build_services, consumer, until
from tests.redis_servers import embedded_redis, redis_url  # noqa: F401 - fixtures: both servers


class CutOnceInbox(Inbox):
    """The inbox of a consumer whose connection drops once, as it records its first accepted turn."""

    cut = 0

    async def save_accepted(self, delivery: Delivery, turn: Turn) -> None:
        if not self.cut:
            self.cut += 1
            raise ConnectionError("Connection closed by server.")
        await super().save_accepted(delivery, turn)


@pytest.fixture
async def services(channel_settings):
    built = build_services(channel_settings.model_copy(update={"inbox_retry_first_s": 0.1}))
    yield built
    await built.aclose()


async def _user_texts(services) -> list[str]:
    conversation_id = (await services.store.redis.zrange(services.store.key("convs"), 0, -1))[0].decode()
    messages = await services.store.conversation_messages(conversation_id)
    return [m.text for m in messages if m.role.value == "user"]


async def test_a_delivery_cut_off_while_accepted_is_answered_on_its_retry_and_stored_once(
        services, fake_telegram, fake_openai):
    fake_openai.script_reply("Day rentals are 30 euros.")
    update = vendors.telegram_update(vendors.telegram_message("How much is a day rental?"))
    assert await services.inbox.push("telegram", str(update["update_id"]), str(vendors.USER_ID), json.dumps(update))

    inbox = CutOnceInbox(services.redis, services.store)
    cut = consumer(services, inbox)
    await cut.start()
    try:
        await until(lambda: fake_telegram.sent_texts() == ["Day rentals are 30 euros."], 10,
                    "the reply after the retry", lambda: fake_telegram.sent_texts())
        await until(lambda: cut.in_flight == 0, 5, "the turn to finish")
    finally:
        await cut.stop()
    assert inbox.cut == 1  # the first try was cut off, as intended
    assert await services.redis.xlen(services.inbox.stream) == 0
    assert await _user_texts(services) == ["How much is a day rental?"]
    assert len(fake_openai.chat_requests()) == 1


async def test_another_inbox_entry_for_a_message_already_taken_is_still_a_duplicate(
        services, fake_telegram, fake_openai):
    fake_openai.script_reply("Once.")
    update = vendors.telegram_update(vendors.telegram_message("Are you open on Sunday?"))
    # The same update in two inbox entries (as if a redelivery got past the webhook's own check).
    for dedup_id in (str(update["update_id"]), f"{update['update_id']}-again"):
        assert await services.inbox.push("telegram", dedup_id, str(vendors.USER_ID), json.dumps(update))
    both = consumer(services)
    await both.start()
    try:
        await until(lambda: fake_telegram.sent_texts() == ["Once."], 10, "the one reply")
        await until(lambda: both.in_flight == 0 and services.metrics.duplicates.labels("telegram")._value.get() == 1,
                    5, "the second entry to be taken for a duplicate",
                    lambda: (both.in_flight, services.metrics.duplicates.labels("telegram")._value.get()))
    finally:
        await both.stop()
    assert fake_telegram.sent_texts() == ["Once."]
    assert await _user_texts(services) == ["Are you open on Sunday?"]

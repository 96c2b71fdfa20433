"""Replies go out once even when consumers die or stall: a turn resumed after its process died between
sending and recording its reply does not send it again (and one that died before sending does send),
and a consumer that stalled past the reclaim time and lost its delivery to another sends and stores
nothing (fenced). Twilio takes an idempotency key: there a resumed turn resends under the same token
and Twilio sends the SMS once. Real vendor clients against the fake APIs; real Redis."""

from __future__ import annotations

import asyncio
import json

import pytest

from gateway.core.models import DeliveryStatus, Message, Role
from gateway.inbox.consumer import InboxConsumer
from gateway.inbox.stream import Delivery, Inbox
from gateway.services import Services
from tests.channels import vendors
from tests.channels.inbox_consumers import build_services, consumer, take_over, until
from tests.redis_servers import embedded_redis, redis_url  # noqa: F401 - fixtures: both servers


class StalledInbox(Inbox):
    """The inbox as seen by a consumer whose loop stalls: its keep-alives and reclaims never reach Redis
    (its turn goes on, slowly), so the entry idles past the reclaim time."""

    async def keep(self, consumer: str, entry_ids: list[str]) -> list[str]:
        return []

    async def reclaim(self, consumer: str, idle_ms: int, count: int,
                      start: str = "0-0") -> tuple[list[Delivery], str]:
        return [], "0-0"


@pytest.fixture
async def services(channel_settings):
    built = build_services(channel_settings)
    yield built
    await built.aclose()


async def _die(consumer: InboxConsumer) -> None:
    """What SIGKILL leaves: the consumer's work stops where it is; nothing is handed back or acknowledged."""
    tasks = [*consumer._tasks, *consumer._inflight.values()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _push(services: Services, text: str) -> None:
    update = vendors.telegram_update(vendors.telegram_message(text))
    assert await services.inbox.push("telegram", str(update["update_id"]), str(vendors.USER_ID), json.dumps(update))


async def _agent_messages(services: Services, identity: str = f"telegram:{vendors.USER_ID}") -> list[Message]:
    persona_id = (await services.redis.get(services.store.key("identity", identity))).decode()
    ids = await services.redis.zrange(services.store.key("persona", persona_id, "msgs"), 0, -1)
    raws = await services.redis.mget([services.store.key("msg", i.decode()) for i in ids])
    return [m for m in (Message.model_validate_json(r) for r in raws) if m.role == Role.AGENT]


async def test_a_turn_resumed_after_dying_between_send_and_record_does_not_reply_again(
        services, fake_telegram, fake_openai):
    fake_openai.script_reply("one answer only")
    fake_openai.script_reply("a second answer")
    fake_telegram.answer_sends_after_s = 30  # the reply reaches the user; the process dies before it hears so
    await _push(services, "How much is a day rental?")
    dying = consumer(services)
    await dying.start()
    await until(lambda: fake_telegram.sent_texts() == ["one answer only"], 10, "the first reply to be sent")
    await _die(dying)
    fake_telegram.answer_sends_after_s = 0

    await take_over(services)
    assert fake_telegram.sent_texts() == ["one answer only"]
    assert len(fake_openai.chat_requests()) == 1  # the recorded reply stands; the model is not asked again
    [stored] = await _agent_messages(services)
    assert stored.text == "one answer only"
    # Whether the user got it cannot be known here: the transcript says so instead of "delivered".
    assert stored.delivery == DeliveryStatus.UNCERTAIN and "not sent again" in stored.delivery_error


async def test_a_turn_resumed_after_dying_before_the_send_still_replies(services, fake_telegram, fake_openai):
    fake_openai.script_reply("never sent", delay_s=30)
    fake_openai.script_reply("answered after the crash")
    await _push(services, "Do you rent tandems?")
    dying = consumer(services)
    await dying.start()
    await until(lambda: len(fake_openai.chat_requests()) == 1, 10, "the model to be asked")
    await _die(dying)

    await take_over(services)
    assert fake_telegram.sent_texts() == ["answered after the crash"]
    assert [(m.text, m.delivery) for m in await _agent_messages(services)] == [
        ("answered after the crash", DeliveryStatus.DELIVERED)]


async def test_a_stalled_consumer_whose_delivery_was_taken_over_sends_and_stores_nothing(
        services, fake_telegram, fake_openai):
    fake_openai.script_reply("from the stalled consumer", delay_s=1.0)
    fake_openai.script_reply("from the consumer that took over", delay_s=1.5)
    await _push(services, "Are you open on Sunday?")
    stalled = consumer(services, StalledInbox(services.redis, services.store))
    await stalled.start()
    await until(lambda: len(fake_openai.chat_requests()) == 1, 10, "the stalled consumer to ask the model")
    taking_over = consumer(services)
    await taking_over.start()
    try:
        await until(lambda: services.metrics.inbox_reclaimed.labels("telegram")._value.get() == 1, 5,
                     "the delivery to be taken over")
        await until(lambda: stalled.in_flight == 0 and taking_over.in_flight == 0, 10, "both turns to end")
    finally:
        await taking_over.stop()
        await stalled.stop()
    assert fake_telegram.sent_texts() == ["from the consumer that took over"]
    assert [m.text for m in await _agent_messages(services)] == ["from the consumer that took over"]
    assert await services.redis.xlen(services.inbox.stream) == 0


async def test_a_resumed_sms_turn_resends_under_the_same_idempotency_token_and_one_sms_goes_out(
        services, fake_twilio, fake_openai):
    fake_openai.script_reply("one SMS only")
    fake_twilio.answer_creates_after_s = 30  # Twilio sends it; the process dies before it hears so
    params = vendors.sms_params("Do you deliver bikes?")
    assert await services.inbox.push("twilio_sms", params["MessageSid"], params["From"], json.dumps(params))
    dying = consumer(services)
    await dying.start()
    await until(lambda: fake_twilio.sent_texts() == ["one SMS only"], 10, "the first SMS to be sent")
    await _die(dying)
    fake_twilio.answer_creates_after_s = 0

    await take_over(services, "twilio_sms")
    assert fake_twilio.sent_texts() == ["one SMS only"]
    first, again = fake_twilio.tokens
    assert first == again and first.endswith(":1")  # <turn id>:<part>, the same on the resend
    assert len(fake_openai.chat_requests()) == 1
    assert [m.text for m in await _agent_messages(services, f"phone:{vendors.CALLER}")] == ["one SMS only"]

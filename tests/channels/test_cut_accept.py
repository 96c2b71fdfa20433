"""Deliveries cut off between two of their records are answered all the same.

- Acceptance cut off after the user message was stored (Redis drops the connection before the accepted
  turn is recorded): answered when it is tried again, the user message stored once; a second inbox entry
  for the same message is still a duplicate.
- A turn that ran while the vendor refused its reply, whose consumer went away before recording that the
  reply must wait: the consumer that takes it over sends the stored reply (the turn is not run again).

Both were found by bench/soak.py (a Redis restart, then a SIGKILLed worker, in those windows): each was
acknowledged without a reply.
"""

from __future__ import annotations

import json

import pytest

from gateway.inbox.retries import Retries, Waiting
from gateway.inbox.stream import Delivery, Inbox
from gateway.turn.pipeline import Turn
from tests.channels import vendors
from tests.channels.inbox_consumers import build_services, consumer, until
from tests.redis_servers import embedded_redis, redis_url  # noqa: F401 - fixtures: both servers


class CutOnceInbox(Inbox):
    """The inbox of a consumer whose first accepted turn is recorded in a round trip that fails after
    Redis applied it (the user message is stored; the client sees an error, as when the connection drops
    before the answer): the accepted turn is recorded in the turn's opening round trip, so the failure is
    a command of that round trip that Redis refuses."""

    cut = 0

    def save_accepted_into(self, pipe, delivery: Delivery, turn: Turn) -> None:
        super().save_accepted_into(pipe, delivery, turn)
        if not self.cut:
            self.cut += 1
            pipe.execute_command("SWITCHBOARD-TEST-CUT")  # answered "unknown command": the round trip fails


@pytest.fixture
async def services(channel_settings):
    built = build_services(channel_settings.model_copy(update={"inbox_retry_first_s": 0.1}))
    yield built
    await built.aclose()


async def _messages(services, role: str) -> list:
    """The one conversation's stored messages of ``role``."""
    conversation_id = (await services.store.redis.zrange(services.store.key("convs"), 0, -1))[0].decode()
    return [m for m in await services.store.conversation_messages(conversation_id) if m.role.value == role]


async def _user_texts(services) -> list[str]:
    return [m.text for m in await _messages(services, "user")]


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


class ForgetfulRetries(Retries):
    """The retry records of a consumer that went away before it could write its first one."""

    lost = 0

    async def wait(self, *args, **kwargs) -> Waiting | None:
        if not self.lost:
            self.lost += 1
            raise ConnectionError("Connection closed by server.")
        return await super().wait(*args, **kwargs)


async def test_a_reply_the_vendor_refused_before_its_consumer_went_away_is_sent_when_taken_over(
        services, fake_telegram, fake_openai):
    fake_telegram.recorder.outage("sendMessage", 502, description="Bad Gateway")
    fake_openai.script_reply("We open at nine.")
    update = vendors.telegram_update(vendors.telegram_message("When do you open?"))
    assert await services.inbox.push("telegram", str(update["update_id"]), str(vendors.USER_ID), json.dumps(update))

    inbox = Inbox(services.redis, services.store)
    inbox.retries = ForgetfulRetries(services.redis, services.store, inbox.stream, inbox.retries.window)
    gone = consumer(services, inbox)
    await gone.start()
    try:
        await until(lambda: inbox.retries.lost == 1 and gone.in_flight == 0, 10,
                    "the turn to finish with its reply refused")
    finally:
        await gone.stop()
    assert fake_telegram.sent_texts() == []
    assert await services.redis.xlen(services.inbox.stream) == 1  # left pending: nothing says it must wait

    fake_telegram.recorder.back("sendMessage")
    taking_over = consumer(services)  # the turn is not run again: its stored reply waits, then goes out
    await taking_over.start()
    try:
        await until(lambda: fake_telegram.sent_texts() == ["We open at nine."], 10, "the reply",
                    lambda: fake_telegram.sent_texts())
        await until(lambda: taking_over.in_flight == 0, 5, "the resend to finish")
    finally:
        await taking_over.stop()
    assert fake_telegram.sent_texts() == ["We open at nine."]
    assert len(fake_openai.chat_requests()) == 1
    assert await services.redis.xlen(services.inbox.stream) == 0
    [agent] = await _messages(services, "agent")
    assert agent.delivery.value == "delivered"

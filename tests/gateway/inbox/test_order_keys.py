"""A chat's order keys (ticket counter, "now serving") expire once the chat is idle, never while one
of its deliveries waits or runs, and a chat that comes back after expiry is still answered in order."""

from __future__ import annotations

import asyncio

import pytest

from gateway.services import Services
from tests.gateway.inbox.test_inbox import RecordingChannel, consumer, push, until
from tests.redis_servers import embedded_redis, redis_url  # noqa: F401 - fixtures: both servers

IDLE_TTL_S = 0.3


@pytest.fixture
async def services(settings):
    built = Services.build(settings.model_copy(update={"inbox_reclaim_s": 0.3, "order_idle_ttl_s": IDLE_TTL_S}),
                           consume_inbox=False)
    yield built
    await built.aclose()


async def order_keys(services: Services, chat: str) -> list[bytes | None]:
    return [await services.redis.get(key) for key in services.inbox.order.order_keys(chat)]


async def test_order_keys_expire_once_the_chat_is_idle_never_while_it_has_work(services):
    channel = RecordingChannel()
    for n in range(3):
        await push(services, n)
    await asyncio.sleep(IDLE_TTL_S * 2)  # nobody consumes yet: the chat has work waiting
    assert await order_keys(services, "chat-a") == [b"3", None]
    live = consumer(services, channel)
    await live.start()
    try:
        await until(lambda: channel.sent == [0, 1, 2], what="the first three deliveries")
        ticket_key, serving_key = services.inbox.order.order_keys("chat-a")
        assert 0 < await services.redis.pttl(ticket_key) <= IDLE_TTL_S * 1000
        deadline = asyncio.get_running_loop().time() + 3
        while await order_keys(services, "chat-a") != [None, None]:
            assert asyncio.get_running_loop().time() < deadline, "the idle chat's order keys never expired"
            await asyncio.sleep(0.05)
        # the chat comes back: its counters start over together and its order still holds
        await push(services, 3, slow=0.3)
        await push(services, 4)
        await push(services, 5)
        assert await order_keys(services, "chat-a") == [b"3", None]
        await until(lambda: channel.sent[3:] == [3, 4, 5], what="the chat's next deliveries")
    finally:
        await live.stop()
    assert [n for _, n in channel.accepted] == [0, 1, 2, 3, 4, 5]


async def test_a_new_delivery_keeps_an_idle_chats_keys_from_expiring(services):
    channel = RecordingChannel()
    live = consumer(services, channel)
    await live.start()
    try:
        await push(services, 0)
        await until(lambda: channel.sent == [0], what="the first delivery")
        ticket_key, serving_key = services.inbox.order.order_keys("chat-a")
        assert await services.redis.pttl(serving_key) > 0
        await push(services, 1, slow=IDLE_TTL_S * 2)  # accepted slowly: longer than the idle TTL
        assert await services.redis.pttl(ticket_key) == -1 and await services.redis.pttl(serving_key) == -1
        await push(services, 2)
        await until(lambda: channel.sent == [0, 1, 2], what="the slow delivery and its successor")
    finally:
        await live.stop()
    assert [n for _, n in channel.accepted] == [0, 1, 2]

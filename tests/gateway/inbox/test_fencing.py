"""A consumer that lost its entry to another (it stalled past the reclaim time) is fenced by the
consumer group's pending list: its keep-alive no longer takes the entry back and its ack does nothing."""

from __future__ import annotations

import asyncio

from tests.gateway.inbox.test_inbox import push, services, stream_length  # noqa: F401 - services: the fixture
from tests.redis_servers import embedded_redis, redis_url  # noqa: F401 - fixtures: both servers


async def owner(built, entry_id: str) -> str:
    [row] = await built.redis.xpending_range(built.inbox.stream, "turns", min=entry_id, max=entry_id, count=1)
    name = row["consumer"]
    return name.decode() if isinstance(name, bytes) else name


async def test_a_stale_owner_neither_takes_its_entry_back_nor_acknowledges_it(services):  # noqa: F811
    await push(services, 21)
    await services.inbox.ensure_group()
    [mine] = await services.inbox.read("stalled", 10, 100)
    await asyncio.sleep(0.05)
    [theirs], _ = await services.inbox.reclaim("new-owner", 10, 10)  # it idled past the reclaim time
    assert theirs.id == mine.id and await owner(services, mine.id) == "new-owner"

    assert await services.inbox.keep("stalled", [mine.id]) == [mine.id]  # lost, and left alone
    assert await owner(services, mine.id) == "new-owner"
    assert await services.inbox.done(mine, "stalled") is False
    assert await stream_length(services) == 1  # still the new owner's to finish

    assert await services.inbox.keep("new-owner", [theirs.id]) == []
    assert await services.inbox.done(theirs, "new-owner") is True
    assert await stream_length(services) == 0

"""Turns of one conversation run one at a time and in arrival order, even across gateway processes."""

from __future__ import annotations

import asyncio

from gateway.core.models import InboundMessage
from gateway.services import Services
from tests.sinks import RecordingSink as _Sink


async def test_two_replicas_serialise_one_conversation_in_arrival_order(settings, fake_openai):
    # Slow replies make overlapping turns likely if the lock did not hold.
    fake_openai.default_delay_s = 0.05
    a, b = Services.build(settings), Services.build(settings)
    delivered: list[str] = []
    try:
        accepted = []
        for i in range(6):
            replica = (a, b)[i % 2]
            inbound = InboundMessage(channel="test", external_user_id="u", external_message_id=f"m{i}",
                                     identity="test:u1", text=f"message {i}")
            accepted.append((replica, await replica.pipeline.accept(inbound)))
        # Start them in reverse: the lock, not the start order, must decide.
        await asyncio.gather(*[r.pipeline.run(t, _Sink(delivered)) for r, t in reversed(accepted)])
    finally:
        await a.aclose()
        await b.aclose()
    assert delivered == [f"echo: message {i}" for i in range(6)]
    # Each prompt saw every earlier exchange: no turn ran before the previous one finished.
    prompts = [r["body"]["messages"] for r in fake_openai.chat_requests()]
    assert [len(p) for p in prompts] == [2 + 2 * i for i in range(6)]


async def test_a_crashed_holder_does_not_wedge_the_conversation(settings):
    from gateway.conversation.turn_lock import TurnLock

    services = Services.build(settings)
    try:
        lock = TurnLock(services.redis, services.store.prefix, lease_s=0.2, grace_s=0.2)
        dead = await lock.take_ticket("c1")  # a process took a ticket and died before running
        assert dead == 1
        mine = await lock.take_ticket("c1")
        async with lock.hold("c1", mine, wait_s=5):
            pass
        third = await lock.take_ticket("c1")
        async with lock.hold("c1", third, wait_s=1):
            pass
    finally:
        await services.aclose()

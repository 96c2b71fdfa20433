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


async def test_a_lease_keeper_that_ignores_its_cancellation_does_not_hold_the_turn_up(settings, caplog):
    from gateway.conversation import turn_lock
    from gateway.conversation.turn_lock import HeldTurn

    ends = asyncio.Event()

    async def keeper_that_loses_its_cancellation() -> None:
        while not ends.is_set():
            try:
                await ends.wait()
            except asyncio.CancelledError:
                pass  # what a library that turned the cancellation into an error and went on would do

    held = HeldTurn("c1", 1)
    held.keeper = asyncio.create_task(keeper_that_loses_its_cancellation(), name="turn lease c1")
    await asyncio.sleep(0)
    with caplog.at_level("WARNING", logger=turn_lock.__name__):
        started = asyncio.get_running_loop().time()
        stopping = asyncio.create_task(held.stop_keeping())
        done, _ = await asyncio.wait({stopping}, timeout=10)  # before: it awaited the keeper for ever
        took = asyncio.get_running_loop().time() - started
        ends.set()
        await stopping
    assert done, "stop_keeping waited on a keeper that did not stop"
    assert held.stopping and held.keeper is None
    assert turn_lock.KEEPER_STOP_S <= took < turn_lock.KEEPER_STOP_S + 1.0
    [warning] = [r.getMessage() for r in caplog.records if "did not stop when cancelled" in r.getMessage()]
    assert "keeper_that_loses_its_cancellation" in warning and "Event.wait" in warning


async def test_a_lease_keeper_stops_at_once_when_cancelled(settings):
    from gateway.conversation.turn_lock import TurnLock

    services = Services.build(settings)
    try:
        lock = TurnLock(services.redis, services.store.prefix, lease_s=0.3)
        ticket = await lock.take_ticket("c2")
        async with lock.hold("c2", ticket, wait_s=5) as held:
            await asyncio.sleep(0.35)  # a renewal or two
            keeper = held.keeper
            started = asyncio.get_running_loop().time()
            await held.stop_keeping()
            assert asyncio.get_running_loop().time() - started < 0.5 and keeper.done()
    finally:
        await services.aclose()

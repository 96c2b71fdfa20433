"""``awaiting(task)`` names where a suspended task waits, through the coroutines and tasks it awaits."""

from __future__ import annotations

import asyncio

from gateway.core.awaits import awaiting


async def test_the_chain_goes_through_an_awaited_task_down_to_what_it_waits_on():
    released = asyncio.Event()

    async def renew_forever() -> None:
        await released.wait()

    async def stop_keeping(keeper: asyncio.Task) -> None:
        await keeper

    keeper = asyncio.create_task(renew_forever(), name="turn lease c1")
    stopping = asyncio.create_task(stop_keeping(keeper), name="turn")
    await asyncio.sleep(0.01)
    chain = [link.split(" (")[0].rsplit(".", 1)[-1] for link in awaiting(stopping).split(" → ")]
    released.set()
    await stopping
    assert chain[:4] == ["stop_keeping", "task 'turn lease c1'", "renew_forever", "wait"]
    assert awaiting(stopping) == "(not suspended)"

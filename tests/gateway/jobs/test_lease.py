"""The renewable lease against a real Redis: one holder at a time, a takeover when the holder stops
renewing, and the work cancelled when another replica has taken the lease."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from gateway.jobs.lease import Lease, run_while_held


async def _runs(redis: Redis, key: str, started: list[str], who: str, ttl_s: float = 0.6) -> asyncio.Task:
    async def work() -> None:
        started.append(who)
        await asyncio.Event().wait()

    return asyncio.create_task(run_while_held(Lease(redis, key, ttl_s=ttl_s), work, name=who))


async def test_one_holder_and_a_takeover_when_it_stops(redis_url, agent_id) -> None:
    redis = Redis.from_url(redis_url)
    key = f"sb:{agent_id}:lease:one"
    started: list[str] = []
    first = await _runs(redis, key, started, "a")
    await asyncio.sleep(0.3)
    second = await _runs(redis, key, started, "b")
    await asyncio.sleep(1.0)  # several renewals: b never starts while a holds it
    assert started == ["a"]
    first.cancel()  # a clean stop frees the lease at once
    await asyncio.gather(first, return_exceptions=True)
    await asyncio.sleep(0.5)
    assert started == ["a", "b"]
    second.cancel()
    await asyncio.gather(second, return_exceptions=True)
    assert await redis.get(key) is None
    await redis.aclose()


async def test_a_holder_that_died_is_taken_over_after_its_lease(redis_url, agent_id) -> None:
    redis = Redis.from_url(redis_url)
    key = f"sb:{agent_id}:lease:dead"
    dead = Lease(redis, key, ttl_s=0.6)
    assert await dead.take()  # held, then never renewed: its process is gone
    started = asyncio.Event()

    async def work() -> None:
        started.set()
        await asyncio.Event().wait()

    loop = asyncio.get_running_loop()
    begun = loop.time()
    waiter = asyncio.create_task(run_while_held(Lease(redis, key, ttl_s=0.6), work, name="b"))
    await asyncio.wait_for(started.wait(), 3)
    assert 0.3 < loop.time() - begun < 1.5
    assert not await dead.take()
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    await redis.aclose()


async def test_work_is_cancelled_when_another_replica_holds_the_lease(redis_url, agent_id) -> None:
    redis = Redis.from_url(redis_url)
    key = f"sb:{agent_id}:lease:fenced"
    cancelled = asyncio.Event()

    async def work() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    holder = asyncio.create_task(run_while_held(Lease(redis, key, ttl_s=0.6), work, name="a"))
    await asyncio.sleep(0.2)
    await redis.set(key, "another-replica", px=5000)  # e.g. a's renewals were stalled past its lease
    await asyncio.wait_for(cancelled.wait(), 2)
    holder.cancel()
    await asyncio.gather(holder, return_exceptions=True)
    assert await redis.get(key) == b"another-replica"  # a frees nothing of the new holder's
    await redis.aclose()


async def test_work_that_fails_starts_again_while_held(redis_url, agent_id) -> None:
    redis = Redis.from_url(redis_url)
    runs: list[int] = []

    async def work() -> None:
        runs.append(1)
        raise RuntimeError("the mailbox went away")

    holder = asyncio.create_task(run_while_held(Lease(redis, f"sb:{agent_id}:lease:retry", ttl_s=0.3), work,
                                                name="a", retry_s=0.05))
    await asyncio.sleep(1.0)
    holder.cancel()
    await asyncio.gather(holder, return_exceptions=True)
    assert len(runs) >= 3
    await redis.aclose()

"""A renewable Redis lease: one holder among every replica for long-lived work.

Where one process at a time must hold something open (a webhook endpoint's delivery loop, a mailbox
watched with IMAP IDLE, a bot's Discord Gateway connection), each replica tries to take the same key.
The holder renews it well before it runs out; a holder that dies stops renewing, so another replica
takes the key over within one lease. ``run_while_held`` wraps the whole pattern: wait for the lease,
run the work, renew while it runs, cancel the work the moment the lease is lost (fenced: another
replica took it), and start again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis

__all__ = ["Lease", "run_while_held", "stopping"]

log = logging.getLogger(__name__)

# KEYS: the lease. ARGV: our token, lease ms. Take it when free, renew it when ours; 1 when we hold it.
_TAKE = """
local holder = redis.call('GET', KEYS[1])
if holder == false or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
  return 1
end
return 0
"""
# KEYS: the lease. ARGV: our token. Free it only when ours.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def stopping() -> None:
    """Raise ``CancelledError`` when the current task is being cancelled. redis-py (8.1) can swallow a
    cancellation that arrives during a command and return normally (seen in more than half of the tries
    here), so a loop that only waits to be cancelled would run on forever: call this at the top of each
    turn of a long-running loop."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class Lease:
    """One key, held by at most one token at a time, for ``ttl_s`` after each take or renewal."""

    def __init__(self, redis: Redis, key: str, *, ttl_s: float = 30.0, token: str | None = None) -> None:
        self.redis = redis
        self.key = key
        self.ttl_s = ttl_s
        self.token = token or uuid.uuid4().hex
        self._take = redis.register_script(_TAKE)
        self._release = redis.register_script(_RELEASE)

    async def take(self) -> bool:
        """Take the lease when it is free, renew it when it is ours; False while another holds it."""
        return bool(await self._take(keys=[self.key], args=[self.token, int(self.ttl_s * 1000)]))

    async def release(self) -> None:
        """Free the lease at once (a clean stop), so another replica need not wait for it to run out."""
        await self._release(keys=[self.key], args=[self.token])


async def run_while_held(lease: Lease, work: Callable[[], Awaitable[None]], *, name: str,
                         retry_s: float | None = None) -> None:
    """Forever (until cancelled): hold ``lease`` and run ``work`` while it is held.

    The lease is renewed every third of its time; when a renewal finds it taken by another replica, or
    Redis cannot be reached for longer than the lease, the work is cancelled (the other holder may already
    be running it). Work that ends or fails is started again after ``retry_s`` (a third of the lease by
    default) as long as the lease is held. Cancelling this coroutine cancels the work and frees the lease.
    """
    every = lease.ttl_s / 3
    pause = every if retry_s is None else retry_s
    loop = asyncio.get_running_loop()
    task: asyncio.Task | None = None
    renewed_at = 0.0
    try:
        while True:
            stopping()
            try:
                held = await lease.take()
                if held:
                    renewed_at = loop.time()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis unreachable: keep working only while the lease cannot have run out
                log.warning("%s: could not renew the lease (%s)", name, exc)
                held = task is not None and loop.time() - renewed_at < lease.ttl_s - every
            if not held and task is not None:
                log.warning("%s: lease lost; stopping here", name)
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                task = None
            if held and (task is None or task.done()):
                if task is not None:
                    error = None if task.cancelled() else task.exception()
                    if error is not None:
                        log.warning("%s: stopped with %r; starting again in %.1f s", name, error, pause)
                    await asyncio.sleep(pause)
                    task = None
                    continue  # renew before starting again
                log.info("%s: lease taken; starting", name)
                task = asyncio.create_task(work(), name=name)
            await asyncio.sleep(every)
    finally:
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        try:
            await asyncio.shield(lease.release())
        except Exception:  # noqa: BLE001 - best effort: the lease runs out on its own
            pass

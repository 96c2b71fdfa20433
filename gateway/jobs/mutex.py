"""A named mutex in Redis shared by every process of an agent (replicas and workers), for work
that must not run twice at once, such as ingesting one document."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator

from redis.asyncio import Redis

from gateway.core.errors import ServiceUnavailable

_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


class RedisMutex:
    def __init__(self, redis: Redis, prefix: str, *, lease_s: float = 900.0, wait_s: float = 900.0) -> None:
        self._redis = redis
        self._prefix = prefix
        self._lease_ms = int(lease_s * 1000)  # a holder that died frees the name after this
        self._wait_s = wait_s

    @contextlib.asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        key = f"{self._prefix}mutex:{name}"
        token = secrets.token_hex(8)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._wait_s
        while not await self._redis.set(key, token, nx=True, px=self._lease_ms):
            if loop.time() > deadline:
                raise ServiceUnavailable(f"{name} is busy: another process has held it for over {self._wait_s:.0f} s")
            await asyncio.sleep(0.05)
        try:
            yield
        finally:
            await self._redis.eval(_RELEASE, 1, key, token)

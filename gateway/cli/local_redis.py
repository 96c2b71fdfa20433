"""The Redis a command works on: the configured one, or the embedded one under the data dir (the running
gateway's when it is up, else started for the moment and stopped again)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from gateway.core.settings import Settings

__all__ = ["local_redis"]


@asynccontextmanager
async def local_redis(settings: Settings) -> AsyncIterator:
    from redis.asyncio import Redis

    from gateway.jobs.embedded import EmbeddedRedis

    started = None
    url = settings.redis_url
    if url is None:
        embedded = EmbeddedRedis(settings.data_dir / "redis")
        if not await asyncio.to_thread(Path(embedded.socket_path).exists):  # no gateway on this data dir
            await asyncio.to_thread(embedded.start)
            started = embedded
        url = embedded.url
    redis = Redis.from_url(url, socket_connect_timeout=settings.redis_connect_timeout_s)
    try:
        yield redis
    finally:
        await redis.aclose()
        if started is not None:
            await asyncio.to_thread(started.stop)

"""Failed attempts counted in Redis per key over a fixed window, shared by every replica; once a
key reaches its limit, further attempts are refused until the window ends (``retry_after``)."""

from __future__ import annotations

from gateway.conversation.store import RedisStore


class AttemptLimit:
    def __init__(self, store: RedisStore, name: str, *, limit: int, window_s: int) -> None:
        self._store = store
        self._name = name
        self.limit = limit
        self.window_s = window_s

    def _key(self, who: str) -> str:
        return self._store.key("attempts", self._name, who)

    async def retry_after(self, who: str) -> int | None:
        """Seconds until ``who`` may try again; None while under the limit."""
        key = self._key(who)
        count = await self._store.redis.get(key)
        if count is None or int(count) < self.limit:
            return None
        ttl = await self._store.redis.ttl(key)
        return max(ttl, 1)

    async def failed(self, who: str) -> None:
        key = self._key(who)
        async with self._store.redis.pipeline(transaction=True) as pipe:
            pipe.set(key, 0, ex=self.window_s, nx=True)  # the window starts at the first failure
            pipe.incr(key)
            await pipe.execute()

    async def clear(self, who: str) -> None:
        await self._store.redis.delete(self._key(who))

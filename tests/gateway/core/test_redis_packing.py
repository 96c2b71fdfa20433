"""Commands packed by hiredis are byte for byte what redis-py's own packer writes, and refused alike."""

from __future__ import annotations

import pytest
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from gateway.core.redis_packing import hiredis_packing

COMMANDS = [
    ("SET", "key", "value"),
    ("SET", "k", "é ü 中文", "EX", 60),
    ("ZADD", "z", 1795706302.802503, "member", 1e20, b"raw\x00bytes", -0.0, "m"),
    ("ZRANGEBYSCORE", "z", "(1.5", "+inf", "WITHSCORES"),
    ("CONFIG GET", "maxmemory"),  # a command name of two words
    (b"OBJECT ENCODING", b"key"),
    ("SET", "big", "x" * 100_000),  # past redis-py's buffer cutoff: it writes chunks, hiredis one buffer
    ("SET", "view", memoryview(b"from a buffer")),
    ("SET", "array", bytearray(b"from a bytearray")),
    ("HSET", "h", "n", 7, "f", 0.1),
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: str(a[0]))
def test_hiredis_packs_what_redis_py_packs(args):
    pool = hiredis_packing(BlockingConnectionPool(connection_class=Connection))
    packed = b"".join(pool.connection_class().pack_command(*args))
    assert packed == b"".join(Connection().pack_command(*args))


@pytest.mark.parametrize("bad", [None, True, 1 + 2j, ["a", "list"]])
def test_what_redis_py_refuses_is_refused_with_its_error(bad):
    pool = hiredis_packing(BlockingConnectionPool(connection_class=Connection))
    with pytest.raises(DataError):
        Connection().pack_command("SET", "k", bad)
    with pytest.raises(DataError):
        pool.connection_class().pack_command("SET", "k", bad)


async def test_a_pipeline_and_a_script_round_trip_through_hiredis_packing(redis_url, agent_id):
    redis = Redis(connection_pool=hiredis_packing(BlockingConnectionPool.from_url(redis_url)))
    key = f"sb:{agent_id}:packing"
    async with redis.pipeline(transaction=True) as pipe:
        pipe.set(key, "é")
        pipe.zadd(key + ":z", {"a": 1.5, "b": 2})
        pipe.get(key)
        pipe.zrange(key + ":z", 0, -1, withscores=True)
        *_, value, scored = await pipe.execute()
    assert value == "é".encode() and scored == [(b"a", 1.5), (b"b", 2.0)]
    assert await redis.eval("return redis.call('GET', KEYS[1])", 1, key) == "é".encode()
    await redis.delete(key, key + ":z")
    await redis.aclose()

"""Commands packed by hiredis (C) on the asyncio client, as redis-py's own sync client already does.

redis-py's asyncio connection packs every command in Python (``PythonRespSerializer`` logic inline): a
turn sends ~50 commands, and packing them was a tenth of its Redis CPU. ``hiredis_packing(pool)`` swaps the
pool's connection class for a subclass whose ``pack_command`` hands the arguments to
``hiredis.pack_command``, with the same argument handling as redis-py's ``HiredisRespSerializer`` (a
command name holding spaces is split, buffers become bytes, a value hiredis cannot pack — None, a bool —
is redis-py's ``DataError``; floats are written as ``repr`` writes them, as redis-py's encoder does).
"""

from __future__ import annotations

from typing import Any

import hiredis
from redis.asyncio import ConnectionPool
from redis.exceptions import DataError

__all__ = ["hiredis_packing"]


class _HiredisPacking:
    def pack_command(self, *args: Any) -> list[bytes]:
        head = args[0]
        if isinstance(head, str):
            args = (*head.encode().split(), *args[1:])
        elif b" " in head:
            args = (*head.split(), *args[1:])
        if any(isinstance(arg, bytearray | memoryview) for arg in args):
            args = tuple(bytes(arg) if isinstance(arg, bytearray | memoryview) else arg for arg in args)
        try:  # hiredis refuses what redis-py's encoder refuses (None, bool, other types): its DataError
            return [hiredis.pack_command(args)]
        except TypeError as exc:
            raise DataError(str(exc)) from exc


def hiredis_packing(pool: ConnectionPool) -> ConnectionPool:
    """The pool, its connections packing commands with hiredis (whatever class the URL chose)."""
    base = pool.connection_class
    pool.connection_class = type(f"HiredisPacking{base.__name__}", (_HiredisPacking, base), {})
    return pool

"""Compression bombs for the outbound and extraction limits: a small body that decodes to a huge one.

Built by compressing one block of filler over and over (fast: a 1 GB gzip bomb takes a few seconds
and is about 1 MB), for the HTTP ``Content-Encoding`` codings the gateway is sent."""

from __future__ import annotations

import zlib
from functools import cache

_BLOCK = 1024 * 1024

WBITS = {"gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS, "raw-deflate": -zlib.MAX_WBITS}


@cache
def bomb(encoding: str, decoded_bytes: int, fill: bytes = b"a") -> bytes:
    """``decoded_bytes`` of ``fill`` compressed as ``encoding`` (gzip, deflate, raw-deflate)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, WBITS[encoding])
    block = fill * (_BLOCK // len(fill))
    parts, left = [], decoded_bytes
    while left > 0:
        piece = block if left >= len(block) else block[:left]
        parts.append(packer.compress(piece))
        left -= len(piece)
    parts.append(packer.flush())
    return b"".join(parts)

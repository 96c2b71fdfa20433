"""One hardened JSON decoding for every request body the gateway accepts.

``json.loads`` alone lets through what later crashes or bloats the gateway: lone surrogates from
``"\\ud800"`` escapes (they cannot be encoded, so the tokenizer, Redis or a vendor SDK fails far
from the request), nesting deep enough for a ``RecursionError``, integers thousands of digits
long, ``NaN`` and ``Infinity``, and bytes that are not UTF-8. A request body is refused (400)
with a message naming where the problem is (``body.history.2.text: invalid Unicode (lone
surrogate)``); it is never repaired, so nothing of it is stored.

``JSONBodyRoute`` makes FastAPI's own body parsing use this decoding; routes and channels that
read the body themselves call ``decode_json`` (or ``read_json``) directly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from gateway.core.errors import BadRequest
from gateway.http.auth import require_admin
from rag_core.clean_text import has_lone_surrogate

__all__ = [
    "MAX_DEPTH", "MAX_INT_DIGITS", "AdminRoute", "InvalidJSON", "JSONBodyRequest", "JSONBodyRoute",
    "decode_json", "read_json",
]

MAX_DEPTH = 64  # vendor payloads (Slack blocks) nest about 10 deep; RecursionError starts near 1,000
MAX_INT_DIGITS = 40  # ids and counts fit in 20; int() of 4,300+ digits raises, and far below that it is slow
MAX_FLOAT_CHARS = 100


class InvalidJSON(ValueError):
    """The body is refused; ``where`` names the place (``body``, ``body.query``, ``line 3``)."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem
        self.message = f"{where}: {problem}"


class _Refused:
    """Stands in for a number the parser saw but we refuse; the walk reports it with its path."""

    __slots__ = ("problem",)

    def __init__(self, problem: str) -> None:
        self.problem = problem


def _int(text: str) -> int | _Refused:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        return _Refused(f"integer of {digits} digits (the limit is {MAX_INT_DIGITS})")
    return int(text)


def _float(text: str) -> float | _Refused:
    if len(text) > MAX_FLOAT_CHARS:
        return _Refused(f"number of {len(text)} characters (the limit is {MAX_FLOAT_CHARS})")
    value = float(text)
    return value if math.isfinite(value) else _Refused(f"number {text} is out of range")


def _constant(name: str) -> _Refused:
    return _Refused(f"{name} is not a JSON number")


def _check(value: Any, where: str) -> None:
    """Walk the decoded value (iteratively: depth is what we are guarding against)."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise InvalidJSON(where, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, str):
            if has_lone_surrogate(item):
                raise InvalidJSON(_place(where, path), "invalid Unicode (lone surrogate)")
        elif isinstance(item, dict):
            for key, child in item.items():
                if has_lone_surrogate(key):
                    raise InvalidJSON(_place(where, path), "invalid Unicode (lone surrogate) in a key")
                stack.append((child, (*path, key)))
        elif isinstance(item, list):
            stack.extend((child, (*path, index)) for index, child in enumerate(item))
        elif isinstance(item, _Refused):
            raise InvalidJSON(_place(where, path), item.problem)


def _place(where: str, path: tuple[str | int, ...]) -> str:
    return ".".join([where, *map(str, path)])


def decode_json(raw: bytes | str, *, where: str = "body") -> Any:
    """Decode ``raw`` (UTF-8 bytes, or text) under the rules above; ``InvalidJSON`` says why not."""
    if isinstance(raw, bytes | bytearray):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidJSON(where, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    else:
        text = raw
    try:
        value = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise InvalidJSON(where, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise InvalidJSON(where, f"nested deeper than {MAX_DEPTH} levels") from None
    _check(value, where)
    return value


async def read_json(request: Request) -> Any:
    """The request's body decoded; ``BadRequest`` (400) with our message otherwise."""
    try:
        return decode_json(await request.body())
    except InvalidJSON as exc:
        raise BadRequest(exc.message) from None


class JSONBodyRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            try:
                self._json = decode_json(await self.body())
            except InvalidJSON as exc:
                # FastAPI passes an HTTPException raised while it parses the body through unchanged;
                # anything else becomes its generic "There was an error parsing the body".
                raise HTTPException(400, exc.message) from None
        return self._json


Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class JSONBodyRoute(APIRoute):
    """A route whose JSON body (FastAPI's body models) is decoded by ``decode_json``."""

    def get_route_handler(self) -> Handler:
        handler = super().get_route_handler()

        async def route_handler(request: Request) -> Response:
            return await handler(JSONBodyRequest(request.scope, request.receive))

        return route_handler


class AdminRoute(JSONBodyRoute):
    """An admin route: the bearer token is checked before the body is read, let alone parsed.

    FastAPI reads and validates the body before it resolves dependencies, so ``Depends(require_admin)``
    alone would make a caller without a token cost a full body read and parse."""

    def get_route_handler(self) -> Handler:
        handler = super().get_route_handler()

        async def route_handler(request: Request) -> Response:
            await require_admin(request)
            return await handler(request)

        return route_handler

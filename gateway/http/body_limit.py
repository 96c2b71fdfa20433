"""An app-wide request body limit, enforced before a byte of an oversized body is read.

Pure ASGI, outside every route: a declared ``Content-Length`` over the limit is answered 413 at
once, without calling the app (so without reading the body); a body without one (chunked) is
counted as the app reads it and cut off at the limit with 413. Some paths take a different limit
(bulk import, uploads). The 413 is the JSON error body every other error has.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.http.errors import error_response

__all__ = ["BodyLimit", "BodyTooLarge"]


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a streamed body passes the limit; FastAPI lets HTTPExceptions
    raised while it reads the body through, and the app's handlers turn it into the JSON 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body is larger than {limit} bytes")


class BodyLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int, per_path: Mapping[str, int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.per_path = dict(per_path or {})

    def limit_for(self, path: str) -> int:
        return self.per_path.get(path.rstrip("/") or "/", self.max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            await _refuse(limit, scope, receive, send)
            return
        await _LimitedRequest(self.app, limit)(scope, receive, send)


async def _refuse(limit: int, scope: Scope, receive: Receive, send: Send) -> None:
    # Connection: close, so the server does not wait for (or try to skip) a body nobody will read.
    response = error_response(413, "payload_too_large", f"request body is larger than {limit} bytes")
    response.headers["connection"] = "close"
    await response(scope, receive, send)


class _LimitedRequest:
    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.received = 0
        self.exceeded = False
        self.started = False
        self.refused = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def limited_receive() -> Message:
            if self.exceeded:
                raise BodyTooLarge(self.limit)
            message = await receive()
            if message["type"] == "http.request":
                self.received += len(message.get("body", b""))
                if self.received > self.limit:
                    self.exceeded = True
                    raise BodyTooLarge(self.limit)
            return message

        async def guarded_send(message: Message) -> None:
            # Whatever the app answers after its body was cut off (a handler may catch broadly),
            # the client gets the 413.
            if self.exceeded and not self.started:
                self.refused = True
                self.started = True
                await _refuse(self.limit, scope, receive, send)
                return
            if self.refused:
                return
            if message["type"] == "http.response.start":
                self.started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except BodyTooLarge:
            if self.started:
                raise
            self.started = self.refused = True
            await _refuse(self.limit, scope, receive, send)

"""Work for a client that left stops: on the given paths (document upload and preview, where one
request can start minutes of extraction), once the request body has been read, the connection is
watched, and the route is cancelled when the client disconnects. Cancelling reaches the extraction's
child process, which is killed (``rag_core.extraction_sandbox``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class CancelOnDisconnect:
    def __init__(self, app: ASGIApp, *, paths: Collection[str]) -> None:
        self.app = app
        self.paths = frozenset(p.rstrip("/") for p in paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") not in self.paths:
            await self.app(scope, receive, send)
            return
        body_read = asyncio.Event()
        left = asyncio.Event()

        async def app_receive() -> Message:
            if body_read.is_set():  # the watcher owns the connection now; the route waits as it would
                await left.wait()
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.disconnect":
                left.set()
            elif not message.get("more_body", False):
                body_read.set()
            return message

        answered = asyncio.Event()

        async def app_send(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered.set()

        route = asyncio.ensure_future(self.app(scope, app_receive, app_send))

        async def watch() -> None:
            await body_read.wait()
            while (await receive())["type"] != "http.disconnect":
                pass
            left.set()
            if not answered.is_set():
                route.cancel()

        watcher = asyncio.ensure_future(watch())
        try:
            await route
        except asyncio.CancelledError:
            if not left.is_set():
                raise  # cancelled from outside (the server stopping), not by the client leaving
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

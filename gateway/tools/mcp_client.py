"""The MCP client side: list a server's tools and call one, over streamable HTTP (the official SDK).

Every request goes through the outbound guard (``GuardedTransport``: loopback and private addresses
refused unless ``SWITCHBOARD_OUTBOUND_ALLOW_HOSTS`` allows them, the address pinned, the answer's size
capped), with the source's headers. Each listing or call opens its own session (``initialize``, then
the request, then the session is closed): simple and stateless across replicas; a kept session per
source would save a round trip or two per call. Whatever goes wrong (refused, unreachable, not MCP,
too slow, too large, a JSON-RPC error) is a ``ToolServerError`` with a sentence saying what.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from mcp import ClientSession, McpError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent
from pydantic import ValidationError

from gateway.core.errors import GatewayError
from gateway.core.outbound import OutboundPolicy, shown
from gateway.core.outbound_client import GuardedTransport, OutboundBlocked, OutboundUnreadable
from gateway.tools.model import ToolInfo, ToolSource
from gateway.turn.tools import ToolOutcome

__all__ = ["LIST_TIMEOUT_S", "MAX_ANSWER_BYTES", "McpClient", "ToolServerError"]

LIST_TIMEOUT_S = 10.0  # an operator waits for a listing on save: a server that hangs is reported, not waited on
MAX_ANSWER_BYTES = 4 * 1024 * 1024  # one response body (a listing, a call's answer); past it the call fails
_MAX_PAGES = 20


class ToolServerError(GatewayError):
    """An MCP server did not answer as one: the sentence says what happened."""


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside the task groups' exception groups the SDK raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException, url: str) -> str:
    exc = _leaf(exc)
    where = shown(url)
    if isinstance(exc, OutboundBlocked):
        return exc.refusal.message
    if isinstance(exc, OutboundUnreadable):
        return exc.describe(f"the answer of {where}")
    if isinstance(exc, McpError):
        return f"{where} answered with an error: {exc.error.message}"
    if isinstance(exc, httpx.ConnectError):
        return f"{where} cannot be reached (connection refused or no route)"
    if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code in (401, 403):
        return f"{where} refused the request (HTTP {exc.response.status_code}): check the source's headers"
    if isinstance(exc, httpx.HTTPStatusError):
        return f"{where} answered HTTP {exc.response.status_code}: not an MCP server (streamable HTTP) there?"
    if isinstance(exc, ValidationError | ValueError):
        return f"{where} answered something that is not MCP's JSON-RPC ({type(exc).__name__})"
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return f"{where} did not answer in time"
    return f"{where} did not answer as an MCP server: {type(exc).__name__}: {str(exc)[:200]}"


def _text(content: list) -> str:
    parts = []
    for item in content:
        if isinstance(item, TextContent):
            parts.append(item.text)
        else:  # images, audio, resources: the model is told what came, not given bytes it cannot read
            parts.append(f"[{getattr(item, 'type', type(item).__name__)} content not shown]")
    return "\n".join(parts)


class _Watched(httpx.AsyncBaseTransport):
    """The guarded transport, noting the first error it meets (sending, or reading a body; the session adds
    answers it could not read). The SDK passes such an error to its session, which does not fail the waiting
    request with it: a refused, too large, broken or malformed answer would be waited on until the time
    limit. ``failed`` lets the call end at once, saying why."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.failed = asyncio.Event()
        self.error: BaseException | None = None

    def note(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc
            self.failed.set()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await self.inner.handle_async_request(request)
        except Exception as exc:
            self.note(exc)
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _WatchedBody(response.stream, self)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _WatchedBody(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, watch: _Watched) -> None:
        self.inner, self.watch = inner, watch

    async def __aiter__(self):
        try:
            async for chunk in self.inner:
                yield chunk
        except Exception as exc:
            self.watch.note(exc)
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _first(work, watch: _Watched):
    """``work``'s result, or the transport's error as soon as it has one."""
    task = asyncio.ensure_future(work)
    failed = asyncio.ensure_future(watch.failed.wait())
    try:
        await asyncio.wait({task, failed}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        failed.cancel()
    if task.done():
        return task.result()
    task.cancel()
    assert watch.error is not None
    raise watch.error


class McpClient:
    def __init__(self, policy: OutboundPolicy, max_answer_bytes: int = MAX_ANSWER_BYTES) -> None:
        self.policy = policy
        self.max_answer_bytes = max_answer_bytes

    @asynccontextmanager
    async def _session(self, source: ToolSource, timeout_s: float) -> AsyncIterator[tuple[ClientSession, _Watched]]:
        watch = _Watched(GuardedTransport(self.policy, self.max_answer_bytes))
        http = httpx.AsyncClient(transport=watch, headers=source.headers, timeout=httpx.Timeout(timeout_s),
                                 follow_redirects=False)
        async with http, streamable_http_client(source.url, http_client=http) as (read, write, _session_id):
            async def on_message(message) -> None:
                if isinstance(message, Exception):  # an answer the SDK could not read (not JSON-RPC)
                    watch.note(message)

            async with ClientSession(read, write, message_handler=on_message) as session:
                await _first(session.initialize(), watch)
                yield session, watch

    async def list_tools(self, source: ToolSource, timeout_s: float = LIST_TIMEOUT_S) -> list[ToolInfo]:
        """``initialize`` + ``tools/list`` (every page), the tools named ``<source>.<tool>``."""
        try:
            async with asyncio.timeout(timeout_s), self._session(source, timeout_s) as (session, watch):
                tools, cursor = [], None
                for _ in range(_MAX_PAGES):
                    page = await _first(session.list_tools(cursor=cursor), watch)
                    tools += page.tools
                    cursor = page.nextCursor
                    if not cursor:
                        break
        except Exception as exc:  # the SDK raises what its transport met, often inside exception groups
            raise ToolServerError(_describe(exc, source.url)) from exc
        return [ToolInfo(name=f"{source.name}.{t.name}", description=t.description or "",
                         input_schema=t.inputSchema or {"type": "object"}) for t in tools]

    async def call(self, source: ToolSource, tool: str, arguments: dict, idempotency_key: str,
                   timeout_s: float = 60.0) -> ToolOutcome:
        """``tools/call`` with ``_meta.idempotencyKey``; the answer's text (a tool error is an outcome with
        ``error`` set, for the model to read). The caller bounds the time it waits (the turn's limits)."""
        try:
            async with self._session(source, timeout_s) as (session, watch):
                result = await _first(session.call_tool(tool, arguments, meta={"idempotencyKey": idempotency_key}),
                                      watch)
        except Exception as exc:
            raise ToolServerError(_describe(exc, source.url)) from exc
        text = _text(result.content)
        if not text and result.structuredContent is not None:
            text = json.dumps(result.structuredContent, ensure_ascii=False)
        if result.isError:
            return ToolOutcome(text="", error=f"the tool reported an error: {text[:1000] or 'no details'}")
        return ToolOutcome(text=text)

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


class McpClient:
    def __init__(self, policy: OutboundPolicy, max_answer_bytes: int = MAX_ANSWER_BYTES) -> None:
        self.policy = policy
        self.max_answer_bytes = max_answer_bytes

    @asynccontextmanager
    async def _session(self, source: ToolSource, timeout_s: float) -> AsyncIterator[ClientSession]:
        http = httpx.AsyncClient(transport=GuardedTransport(self.policy, self.max_answer_bytes),
                                 headers=source.headers, timeout=httpx.Timeout(timeout_s), follow_redirects=False)
        async with http, streamable_http_client(source.url, http_client=http) as (read, write, _session_id):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session

    async def list_tools(self, source: ToolSource, timeout_s: float = LIST_TIMEOUT_S) -> list[ToolInfo]:
        """``initialize`` + ``tools/list`` (every page), the tools named ``<source>.<tool>``."""
        try:
            async with asyncio.timeout(timeout_s), self._session(source, timeout_s) as session:
                tools, cursor = [], None
                for _ in range(_MAX_PAGES):
                    page = await session.list_tools(cursor=cursor)
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
            async with self._session(source, timeout_s) as session:
                result = await session.call_tool(tool, arguments, meta={"idempotencyKey": idempotency_key})
        except Exception as exc:
            raise ToolServerError(_describe(exc, source.url)) from exc
        text = _text(result.content)
        if not text and result.structuredContent is not None:
            text = json.dumps(result.structuredContent, ensure_ascii=False)
        if result.isError:
            return ToolOutcome(text="", error=f"the tool reported an error: {text[:1000] or 'no details'}")
        return ToolOutcome(text=text)

"""The MCP client side: list a server's tools and call one, over streamable HTTP (the official SDK).

Every request goes through the outbound guard (``GuardedTransport``: loopback and private addresses
refused unless ``SWITCHBOARD_OUTBOUND_ALLOW_HOSTS`` allows them, the address pinned, the answer's size
capped), with the source's headers. A listing opens its own session (``initialize``, the listing, the
session closed). Calls share a session kept per source in each process (``_Kept``: its ``initialize``
made once by the SDK, so a call is one HTTP request, not four). A call is that request made directly
(``_Line.call``): the JSON-RPC ``tools/call`` POSTed with the session's id and protocol version, its answer
(JSON, or an SSE stream read up to the answer) checked as the SDK checks it (a ``JSONRPCMessage``, a
``CallToolResult``, structured content against the tool's output schema) — the SDK's own path hands each
message through three tasks and two memory streams, more CPU than the HTTP request itself. The session
is closed after ``KEEP_IDLE_S`` without calls, when the source's URL or headers change, and on any error
— a call that failed on a session already used is made once more on a new one, with the same
idempotency key (the server may have dropped the session). Whatever goes wrong (refused, unreachable,
not MCP, too slow, too large, a JSON-RPC error) is a ``ToolServerError`` with a sentence saying what.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for
from mcp import ClientSession, McpError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import LATEST_PROTOCOL_VERSION, CallToolResult, JSONRPCError, JSONRPCMessage, JSONRPCResponse
from pydantic import ValidationError
from referencing import Registry

from gateway.core.errors import GatewayError
from gateway.core.outbound import OutboundPolicy, shown
from gateway.core.outbound_client import GuardedTransport, OutboundBlocked, OutboundUnreadable
from gateway.tools.mcp_results import innermost, listed, outcome
from gateway.tools.model import ToolInfo, ToolSource
from gateway.turn.tools import ToolOutcome

__all__ = ["KEEP_IDLE_S", "LIST_TIMEOUT_S", "MAX_ANSWER_BYTES", "McpClient", "ToolServerError"]

LIST_TIMEOUT_S = 10.0  # an operator waits for a listing on save: a server that hangs is reported, not waited on
MAX_ANSWER_BYTES = 4 * 1024 * 1024  # one response body (a listing, a call's answer); past it the call fails
_MAX_PAGES = 20
KEEP_IDLE_S = 120.0  # a kept session with no call for this long is closed
_CALL_TIMEOUT_S = 60.0  # the HTTP limit of a kept session's requests; the turn bounds each call itself


class ToolServerError(GatewayError):
    """An MCP server did not answer as one: the sentence says what happened."""


def _describe(exc: BaseException, url: str) -> str:
    exc = innermost(exc)
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


class _Session(ClientSession):
    """The SDK's session, checking a tool's structured answer against its output schema with a validator
    built once per tool (the SDK checks the schema and builds one on every call: milliseconds each)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._validators: dict[str, Any] = {}

    async def _validate_tool_result(self, name: str, result: CallToolResult) -> None:
        if name not in self._tool_output_schemas:
            await self.list_tools()
        schema = self._tool_output_schemas.get(name)
        if schema is None:
            return
        validator = self._validators.get(name)
        if validator is None:
            kind = validator_for(schema)
            kind.check_schema(schema)
            validator = self._validators[name] = kind(schema, registry=Registry())  # $refs within the schema
        if result.structuredContent is None:
            raise RuntimeError(f"Tool {name} has an output schema but did not return structured content")
        error = best_match(validator.iter_errors(result.structuredContent))
        if error is not None:
            raise RuntimeError(f"Invalid structured content returned by tool {name}: {error.message}")


_CALL_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class _Line:
    """An initialized session of one source: the SDK's (for listings of output schemas) and what a direct
    ``tools/call`` needs — the HTTP client, the session's id and protocol version."""

    def __init__(self, session: _Session, watch: _Watched, http: httpx.AsyncClient, url: str,
                 session_id: Callable[[], str | None], protocol_version: str) -> None:
        self.session, self.watch, self.http, self.url = session, watch, http, url
        self.session_id = session_id
        self.protocol_version = protocol_version
        self._ids = itertools.count(1)

    async def call(self, tool: str, arguments: dict, idempotency_key: str) -> CallToolResult:
        """``tools/call`` as one POST on the session. A JSON-RPC error is an ``McpError``; an answer that is
        not JSON-RPC a ``ValidationError``; HTTP errors are httpx's (404: the server dropped the session)."""
        request_id = f"sb-{next(self._ids)}"  # a string: never one of the SDK's integer ids on this session
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {
            "name": tool, "arguments": arguments, "_meta": {"idempotencyKey": idempotency_key}}},
            ensure_ascii=False).encode()
        headers = {**_CALL_HEADERS, "mcp-protocol-version": self.protocol_version}
        session_id = self.session_id()
        if session_id:
            headers["mcp-session-id"] = session_id
        async with self.http.stream("POST", self.url, content=body, headers=headers) as response:
            response.raise_for_status()
            if response.status_code != 200:  # 202 and the like: no answer to a request is not MCP
                raise ValueError(f"HTTP {response.status_code} answered a request")
            if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
                message = await _from_events(response, request_id)
            else:
                message = JSONRPCMessage.model_validate_json(await response.aread())
        answer = message.root
        if isinstance(answer, JSONRPCError):
            raise McpError(answer.error)
        if not isinstance(answer, JSONRPCResponse):
            raise ValueError(f"a {type(answer).__name__} answered a request")
        result = CallToolResult.model_validate(answer.result)
        if not result.isError:
            await self.session._validate_tool_result(tool, result)
        return result


async def _from_events(response: httpx.Response, request_id: str) -> JSONRPCMessage:
    """The answer to ``request_id`` in an SSE stream (the server's notifications and requests before it are
    passed over), read only up to it."""
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:  # an event ends
            message = JSONRPCMessage.model_validate_json("\n".join(data))
            data = []
            if isinstance(message.root, JSONRPCResponse | JSONRPCError) and message.root.id == request_id:
                return message
    raise ValueError("the event stream ended without the answer")


class McpClient:
    def __init__(self, policy: OutboundPolicy, max_answer_bytes: int = MAX_ANSWER_BYTES) -> None:
        self.policy = policy
        self.max_answer_bytes = max_answer_bytes
        self._kept: dict[str, _Kept] = {}  # source id → its kept session (in the loop that opened it)

    @asynccontextmanager
    async def _session(self, source: ToolSource, timeout_s: float) -> AsyncIterator[_Line]:
        # Every request of a session goes to the source's one URL: its connections may be kept alive.
        watch = _Watched(GuardedTransport(self.policy, self.max_answer_bytes, keep_alive=True))
        http = httpx.AsyncClient(transport=watch, headers=source.headers, timeout=httpx.Timeout(timeout_s),
                                 follow_redirects=False)
        async with http, streamable_http_client(source.url, http_client=http) as (read, write, session_id):
            async def on_message(message) -> None:
                if isinstance(message, Exception):  # an answer the SDK could not read (not JSON-RPC)
                    watch.note(message)

            async with _Session(read, write, message_handler=on_message) as session:
                initialized = await _first(session.initialize(), watch)
                yield _Line(session, watch, http, source.url, session_id,
                            str(initialized.protocolVersion or LATEST_PROTOCOL_VERSION))

    async def list_tools(self, source: ToolSource, timeout_s: float = LIST_TIMEOUT_S) -> list[ToolInfo]:
        """``initialize`` + ``tools/list`` (every page), the tools named ``<source>.<tool>``."""
        try:
            async with asyncio.timeout(timeout_s), self._session(source, timeout_s) as line:
                tools, cursor = [], None
                for _ in range(_MAX_PAGES):
                    page = await _first(line.session.list_tools(cursor=cursor), line.watch)
                    tools += page.tools
                    cursor = page.nextCursor
                    if not cursor:
                        break
        except Exception as exc:  # the SDK raises what its transport met, often inside exception groups
            raise ToolServerError(_describe(exc, source.url)) from exc
        return listed(source, tools)

    async def call(self, source: ToolSource, tool: str, arguments: dict, idempotency_key: str) -> ToolOutcome:
        """``tools/call`` with ``_meta.idempotencyKey``, on the source's kept session; the answer's text (a
        tool error is an outcome with ``error`` set, for the model to read). The caller bounds the time it
        waits (the turn's limits)."""
        for attempt in (1, 2):
            kept = self._kept_for(source)
            reused = kept.used
            kept.used = True
            try:
                line = await kept.ready()
                result = await line.call(tool, arguments, idempotency_key)
            except Exception as exc:
                kept.close()
                if reused and attempt == 1 and not isinstance(innermost(exc), McpError):
                    continue  # a kept session the server may have dropped: once more on a new one
                raise ToolServerError(_describe(exc, source.url)) from exc
            finally:
                kept.touch()
            return outcome(result)
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _kept_for(self, source: ToolSource) -> _Kept:
        loop = asyncio.get_running_loop()
        identity = (source.url, tuple(sorted(source.headers.items())))
        kept = self._kept.get(source.id)
        if kept is None or kept.closed or kept.loop is not loop or kept.identity != identity:
            if kept is not None:
                kept.close()
            kept = self._kept[source.id] = _Kept(self, source, identity, loop)
        return kept

    async def aclose(self) -> None:
        """Close the kept sessions (the process stops)."""
        kept, self._kept = list(self._kept.values()), {}
        for one in kept:
            one.close()
        await asyncio.gather(*(one.task for one in kept if one.loop is asyncio.get_running_loop()),
                             return_exceptions=True)


class _Kept:
    """One source's session, held open by a task of its own (the SDK's task groups must be left in the
    task that entered them) until closed or idle for ``KEEP_IDLE_S``."""

    def __init__(self, client: McpClient, source: ToolSource, identity: tuple, loop) -> None:
        self.identity, self.loop = identity, loop
        self.used = False
        self.closed = False
        self.last = loop.time()
        self._stop = asyncio.Event()
        self._opened: asyncio.Future = loop.create_future()
        self.task = loop.create_task(self._hold(client, source))

    async def _hold(self, client: McpClient, source: ToolSource) -> None:
        try:
            async with client._session(source, _CALL_TIMEOUT_S) as opened:
                self._opened.set_result(opened)
                while not self._stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), KEEP_IDLE_S)
                    if self.loop.time() - self.last >= KEEP_IDLE_S:
                        break
        except Exception as exc:  # noqa: BLE001 - told to the waiting call
            if not self._opened.done():
                self._opened.set_exception(exc)
        finally:
            self.closed = True
            if not self._opened.done():
                self._opened.set_exception(ToolServerError("the session was closed"))

    async def ready(self) -> _Line:
        return await asyncio.shield(self._opened)

    def touch(self) -> None:
        self.last = self.loop.time()

    def close(self) -> None:
        self.closed = True
        self._stop.set()

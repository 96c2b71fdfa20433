"""MCP servers that are a local command (stdio transport), through the official SDK.

Only the CLI adds one (``switchboard tools add-stdio``): a command that runs on the gateway's machine is
never taken over HTTP. Each listing or call starts the command, talks to it over stdin/stdout
(``initialize``, then the request) and ends it, as the HTTP client opens a session per request: simple
and the same on every replica (each runs the command itself, so it must be installed on every one).
The command gets the SDK's small inherited environment (``PATH``, ``HOME``, ``USER``, …), never the
gateway's own (its keys and tokens), and the gateway's working directory.
"""

from __future__ import annotations

import asyncio

from mcp import ClientSession, McpError, StdioServerParameters
from mcp.client.stdio import stdio_client

from gateway.tools.mcp_client import LIST_TIMEOUT_S, ToolServerError
from gateway.tools.mcp_results import innermost, listed, outcome
from gateway.tools.model import ToolInfo, ToolSource
from gateway.turn.tools import ToolOutcome

__all__ = ["StdioClient"]


def _describe(exc: BaseException, source: ToolSource) -> str:
    exc = innermost(exc)
    where = f"the command {source.command[0]!r}"
    if isinstance(exc, FileNotFoundError):
        return f"{where} was not found on this machine (is it installed, and on PATH?)"
    if isinstance(exc, PermissionError):
        return f"{where} cannot be run (permission denied)"
    if isinstance(exc, McpError):
        return f"{where} answered with an error: {exc.error.message}"
    if isinstance(exc, TimeoutError):
        return f"{where} did not answer in time (does it speak MCP on stdin/stdout?)"
    return f"{where} did not answer as an MCP server: {type(exc).__name__}: {str(exc)[:200]}"


class StdioClient:
    def _params(self, source: ToolSource) -> StdioServerParameters:
        return StdioServerParameters(command=source.command[0], args=list(source.command[1:]))

    async def list_tools(self, source: ToolSource, timeout_s: float = LIST_TIMEOUT_S) -> list[ToolInfo]:
        try:
            async with asyncio.timeout(timeout_s), stdio_client(self._params(source)) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                tools, cursor = [], None
                for _ in range(20):
                    page = await session.list_tools(cursor=cursor)
                    tools += page.tools
                    cursor = page.nextCursor
                    if not cursor:
                        break
        except Exception as exc:  # the SDK raises what its transport met, often inside exception groups
            raise ToolServerError(_describe(exc, source)) from exc
        return listed(source, tools)

    async def call(self, source: ToolSource, tool: str, arguments: dict, idempotency_key: str,
                   timeout_s: float = 60.0) -> ToolOutcome:
        try:
            async with asyncio.timeout(timeout_s), stdio_client(self._params(source)) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool(tool, arguments, meta={"idempotencyKey": idempotency_key})
        except Exception as exc:
            raise ToolServerError(_describe(exc, source)) from exc
        return outcome(result)

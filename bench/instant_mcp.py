"""A real MCP server (the SDK's FastMCP, streamable HTTP, stateless, JSON answers) whose ``book_table`` answers
at once, so a benchmark measures the gateway, not the tool. Hostile ones: ``slow_lookup`` sleeps ``SLEEP_S``
seconds, ``huge`` answers 20 MB, a call of ``broken`` is answered with truncated JSON.

Run: python bench/instant_mcp.py PORT [SLEEP_S]
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import uvicorn
from mcp.server.fastmcp import FastMCP

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.fakes.mcp_server import broken_calls  # noqa: E402


def make_app(sleep_s: float = 2.0):
    mcp = FastMCP("crm", stateless_http=True, json_response=True, log_level="WARNING")
    booked = [0]

    @mcp.tool(description="Book a table at the restaurant for a party on a day.")
    async def book_table(party_size: int, day: str) -> str:
        booked[0] += 1
        return f"Booked: a table for {party_size} on {day}, reference BK-{1000 + booked[0]}."

    @mcp.tool(description="Look an order up by its number (slowly).")
    async def slow_lookup(order: str) -> str:
        await asyncio.sleep(sleep_s)
        return f"Order {order}: shipped."

    @mcp.tool(description="Everything about an order (20 MB).")
    async def huge(order: str) -> str:
        return "x" * (20 * 1024 * 1024)

    @mcp.tool(description="Looks an order up, but its answer is broken JSON-RPC (answered by the wrapper).")
    async def broken(order: str) -> str:
        return "never sent"

    return broken_calls(mcp.streamable_http_app())


if __name__ == "__main__":
    port = int(sys.argv[1])
    app = make_app(float(sys.argv[2]) if len(sys.argv) > 2 else 2.0)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)

"""A real MCP server (the SDK's FastMCP, streamable HTTP, stateless, JSON answers) whose one tool answers at
once, so a benchmark measures the gateway, not the tool. ``slow_lookup`` sleeps ``SLEEP_S`` seconds.

Run: python bench/instant_mcp.py PORT [SLEEP_S]
"""

from __future__ import annotations

import asyncio
import sys

import uvicorn
from mcp.server.fastmcp import FastMCP


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

    return mcp.streamable_http_app()


if __name__ == "__main__":
    port = int(sys.argv[1])
    app = make_app(float(sys.argv[2]) if len(sys.argv) > 2 else 2.0)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)

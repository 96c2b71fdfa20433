"""A real MCP server (the SDK's FastMCP, streamable HTTP, stateless, JSON answers) whose ``book_table`` answers
at once, so a benchmark measures the gateway, not the tool. Hostile ones: ``slow_lookup`` sleeps ``SLEEP_S``
seconds, ``huge`` answers 20 MB, a call of ``broken`` is answered with truncated JSON.

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

    @mcp.tool(description="Everything about an order (20 MB).")
    async def huge(order: str) -> str:
        return "x" * (20 * 1024 * 1024)

    @mcp.tool(description="Looks an order up, but its answer is broken JSON-RPC (answered by the wrapper).")
    async def broken(order: str) -> str:
        return "never sent"

    inner = mcp.streamable_http_app()

    async def app(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            await inner(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if b'"tools/call"' in body and b'"broken"' in body:
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": b'{"jsonrpc": "2.0", "id": 1, "result": {"proto'})
            return
        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await inner(scope, replay, send)

    return app


if __name__ == "__main__":
    port = int(sys.argv[1])
    app = make_app(float(sys.argv[2]) if len(sys.argv) > 2 else 2.0)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)

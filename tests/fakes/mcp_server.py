"""A real MCP server (the official SDK's FastMCP, streamable HTTP) with a small CRM's tools.

It records every ``tools/call`` it receives (tool, arguments, ``_meta.idempotencyKey``, the
``Authorization`` header) so tests assert on what the gateway sent and how often. ``hang_s`` makes
``lookup_order`` sleep that long; ``token`` makes every request without ``Bearer <token>`` a 401.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from mcp.server.fastmcp import Context, FastMCP
from starlette.requests import Request
from starlette.responses import JSONResponse


@dataclass
class FakeMcpServer:
    calls: list[dict] = field(default_factory=list)
    hang_s: float = 0.0
    token: str | None = None

    def app(self):
        mcp = FastMCP("crm", stateless_http=True, log_level="WARNING")
        fake = self

        def record(ctx: Context, tool: str, arguments: dict) -> int:
            meta = ctx.request_context.meta
            request = ctx.request_context.request
            fake.calls.append({"tool": tool, "arguments": arguments,
                               "idempotency_key": getattr(meta, "idempotencyKey", None) if meta else None,
                               "authorization": request.headers.get("authorization") if request else None})
            return len(fake.calls)

        @mcp.tool(description="Book a table at the restaurant for a party on a day.")
        async def book_table(party_size: int, day: str, ctx: Context) -> str:
            n = record(ctx, "book_table", {"party_size": party_size, "day": day})
            return f"Booked: a table for {party_size} on {day}, reference BK-{1000 + n}."

        @mcp.tool(description="Look an order up by its number.")
        async def lookup_order(order: str, ctx: Context) -> str:
            record(ctx, "lookup_order", {"order": order})
            if fake.hang_s:
                await asyncio.sleep(fake.hang_s)
            return f"Order {order}: shipped."

        @mcp.tool(description="An order's whole history (long).")
        async def order_history(order: str, ctx: Context) -> str:
            record(ctx, "order_history", {"order": order})
            return "".join(f"{order} event {i}; " for i in range(3000))

        @mcp.tool(description="Everything about an order (answers 20 MB).")
        async def order_dump(order: str, ctx: Context) -> str:
            record(ctx, "order_dump", {"order": order})
            return "x" * (20 * 1024 * 1024)

        inner = mcp.streamable_http_app()

        async def guarded(scope, receive, send):
            if scope["type"] == "http":
                request = Request(scope)
                if fake.token is not None and request.headers.get("authorization") != f"Bearer {fake.token}":
                    await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
                    return
            await inner(scope, receive, send)

        return _WithLifespan(guarded, inner)


class _WithLifespan:
    """The guard in front of the SDK's app, with the SDK app's lifespan (its session manager)."""

    def __init__(self, guarded, inner) -> None:
        self.guarded, self.inner = guarded, inner

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            await self.inner(scope, receive, send)
        else:
            await self.guarded(scope, receive, send)


def malformed_app():
    """An endpoint that answers every MCP request with truncated JSON (a broken server or proxy)."""
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    async def broken(request: Request) -> Response:
        return Response('{"jsonrpc": "2.0", "id": 1, "result": {"proto', media_type="application/json")

    return Starlette(routes=[Route("/mcp", broken, methods=["GET", "POST", "DELETE"])])


def broken_calls(inner, tool: str = "broken"):
    """``inner`` (an MCP server's ASGI app), but a ``tools/call`` of ``tool`` is answered with truncated JSON
    (a server that breaks mid-answer); every other request reaches ``inner`` as it came."""
    marker = f'"{tool}"'.encode()

    async def app(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            await inner(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if b'"tools/call"' in body and marker in body:
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

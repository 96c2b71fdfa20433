"""Calls share a session kept per source: after the first, a call is one HTTP request (no initialize, no
close); a server that restarted (the kept session and its connection gone) is reconnected to, and the call
reaches it once."""

from __future__ import annotations

import pytest
from mcp.server.fastmcp import Context, FastMCP

from gateway.core.outbound import OutboundPolicy
from gateway.tools.mcp_client import McpClient, ToolServerError
from gateway.tools.model import ToolSource
from gateway.turn.tools import ToolOutcome
from tests.fakes.live_server import LiveServer
from tests.fakes.mcp_server import FakeMcpServer, broken_calls
from tests.gateway.tools.conftest import TOKEN


class _Counted:
    def __init__(self, app) -> None:
        self.app, self.requests = app, []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            self.requests.append(scope["method"])
        await self.app(scope, receive, send)


async def test_calls_share_a_kept_session_and_survive_a_server_restart():
    first = FakeMcpServer(token=TOKEN)
    counted = _Counted(first.app())
    client = McpClient(OutboundPolicy.parse("127.0.0.1", None))
    with LiveServer(counted, graceful_timeout_s=1) as server:
        source = ToolSource(name="crm", url=server.url + "/mcp", headers={"Authorization": f"Bearer {TOKEN}"})
        port = server.port
        one = await client.call(source, "book_table", {"party_size": 2, "day": "Monday"}, "t:0")
        opened = len(counted.requests)
        two = await client.call(source, "book_table", {"party_size": 3, "day": "Tuesday"}, "t:1")
        assert len(counted.requests) == opened + 1  # one POST: the kept session's tools/call
        assert counted.requests[-1] == "POST"
    assert one.text.endswith("BK-1001.") and two.text.endswith("BK-1002.")

    second = FakeMcpServer(token=TOKEN)
    with LiveServer(second.app(), port=port, graceful_timeout_s=1):
        three = await client.call(source, "book_table", {"party_size": 4, "day": "Friday"}, "t:2")
    assert three.error is None and three.text.endswith("BK-1001.")  # the new server's first booking
    assert [c["idempotency_key"] for c in second.calls] == ["t:2"]  # reached once
    await client.aclose()


def _chatty_app(stateless: bool):
    """A FastMCP server (SSE answers) whose tool logs to the client before answering, one whose call fails as
    a JSON-RPC error, and a wrapper answering ``broken`` calls with truncated JSON."""
    mcp = FastMCP("chatty", stateless_http=stateless, log_level="WARNING")

    @mcp.tool(description="Counts stock, telling the client as it goes.")
    async def count(item: str, ctx: Context) -> str:
        await ctx.info(f"counting {item}")
        await ctx.report_progress(1, 2)
        return f"{item}: 12"

    @mcp.tool(description="Answers broken JSON-RPC (the wrapper's doing).")
    async def broken() -> str:
        return "never sent"

    return broken_calls(mcp.streamable_http_app())


@pytest.mark.parametrize("stateless", [True, False], ids=["stateless", "with-session-id"])
async def test_a_call_reads_past_the_servers_notifications_and_names_a_broken_or_failed_answer(stateless):
    """The direct ``tools/call`` on a kept session: on a stateless server, and on one that issues a session id
    (the call must carry it, or the server answers 400/404)."""
    client = McpClient(OutboundPolicy.parse("127.0.0.1", None))
    with LiveServer(_chatty_app(stateless), graceful_timeout_s=1) as server:
        source = ToolSource(name="stock", url=server.url + "/mcp")
        counted = await client.call(source, "count", {"item": "tandem"}, "t:0")
        unknown = await client.call(source, "nope", {}, "t:1")
        try:
            await client.call(source, "broken", {}, "t:2")
        except ToolServerError as exc:
            broken = str(exc)
        else:
            broken = "no error"
    await client.aclose()
    assert counted == ToolOutcome(text="tandem: 12")  # the log and progress notifications before it passed over
    assert unknown.error is not None and "nope" in unknown.error
    assert broken == f"{server.url}/mcp answered something that is not MCP's JSON-RPC (ValidationError)"

"""Calls share a session kept per source: after the first, a call is one HTTP request (no initialize, no
close); a server that restarted (the kept session and its connection gone) is reconnected to, and the call
reaches it once."""

from __future__ import annotations

from gateway.core.outbound import OutboundPolicy
from gateway.tools.mcp_client import McpClient
from gateway.tools.model import ToolSource
from tests.fakes.live_server import LiveServer
from tests.fakes.mcp_server import FakeMcpServer
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

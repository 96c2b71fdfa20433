"""Tools on an inbox channel: a Telegram message makes the model call ``crm.book_table`` on a real MCP
server; the reply sent to Telegram carries the result; Telegram retrying the same update (same
update_id) books nothing more and sends nothing more."""

from __future__ import annotations

import httpx
from cryptography.fernet import Fernet
from pydantic import SecretStr

from tests.channels import vendors
from tests.channels.conftest import settle, wait_until
from tests.fakes.live_server import LiveServer
from tests.fakes.mcp_server import FakeMcpServer

ADMIN = {"Authorization": "Bearer admin-secret"}
TOKEN = "crm-token-telegram-5521"


def test_a_telegram_message_books_once_even_when_telegram_retries(fake_telegram, fake_openai, channel_settings):
    from gateway.http.app import create_app

    mcp = FakeMcpServer(token=TOKEN)
    settings = channel_settings.model_copy(update={"secret_key": SecretStr(Fernet.generate_key().decode()),
                                                   "outbound_allow_hosts": "127.0.0.1"})
    with LiveServer(mcp.app(), graceful_timeout_s=1) as tools, LiveServer(create_app(settings)) as live:
        live.services = live.server.config.app.state.services
        with httpx.Client(base_url=live.url, timeout=30) as client:
            added = client.post("/api/tool-sources", headers=ADMIN, json={
                "name": "crm", "url": tools.url + "/mcp", "headers": {"Authorization": f"Bearer {TOKEN}"}})
            assert added.status_code == 201 and len(added.json()["tools"]) == 4, added.text
            patched = client.patch(f"/v1/agents/{settings.agent_id}", headers=ADMIN,
                                   json={"config": {"tools": [{"name": "crm.book_table"}]}})
            assert patched.status_code == 200, patched.text
            fake_openai.auto_tool_call = ("crm__book_table", {"party_size": 4, "day": "Friday"})
            fake_openai.echo_tool_results = True

            update = vendors.telegram_update(vendors.telegram_message("Book a table for four on Friday"))
            assert vendors.post_telegram(client, update).status_code == 200
            wait_until(lambda: fake_telegram.sent_texts(), what="the reply on Telegram")
            settle(live)
            assert vendors.post_telegram(client, update).status_code == 200  # Telegram's retry of the same update
            settle(live)

    assert fake_telegram.sent_texts() == ["From the tools: Booked: a table for 4 on Friday, reference BK-1001."]
    assert [(c["tool"], c["arguments"]) for c in mcp.calls] == [("book_table", {"party_size": 4, "day": "Friday"})]

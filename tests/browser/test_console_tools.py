"""The Tools screen in a real Chromium: an admin adds the shop's OpenAPI document and an MCP server, sees
their tools and status, tries a tool (the shop gets the call; the page shows the answer with the token
masked), chooses an agent's tools and which ask first (a new version with ``config.tools``), refreshes
and deletes a source. The header's token never shows on a page."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from gateway.http.app import create_app
from tests.admin_ui.conftest import PASSWORD
from tests.fakes.live_server import LiveServer
from tests.gateway.tools.conftest import ADMIN, SHOP_TOKEN, TOKEN, mcp_server, shop  # noqa: F401  (fixtures)


@pytest.fixture
def tools_console(settings) -> Iterator[LiveServer]:
    configured = settings.model_copy(update={
        "admin_password": SecretStr(PASSWORD), "admin_user": "root", "outbound_allow_hosts": "127.0.0.1",
        "secret_key": SecretStr(Fernet.generate_key().decode())})
    with LiveServer(create_app(configured)) as server:
        yield server


def test_an_admin_adds_tries_and_chooses_tools(page, tools_console, shop, mcp_server, settings):  # noqa: F811
    console = tools_console.url
    page.goto(f"{console}/admin/tools")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{console}/admin/tools")

    form = page.get_by_role("region", name="Add an OpenAPI source")
    form.get_by_label("Source name").fill("shop")
    form.get_by_label("OpenAPI document URL").fill(f"{shop.url}/openapi.json")
    form.get_by_label("Operations").fill("getOrder, whoAmI, cancelOrder")
    form.get_by_label("Header value").fill(f"Bearer {SHOP_TOKEN}")
    form.get_by_role("button", name="Add OpenAPI source").click()
    assert page.get_by_role("alert").inner_text() == "operations: the OpenAPI document has no operation 'cancelOrder'"
    form = page.get_by_role("region", name="Add an OpenAPI source")
    assert form.get_by_label("Operations").input_value() == "getOrder, whoAmI, cancelOrder"  # kept to fix
    form.get_by_label("Operations").fill("getOrder, whoAmI")
    form.get_by_label("Header value").fill(f"Bearer {SHOP_TOKEN}")  # a secret is never typed back into a page
    form.get_by_role("button", name="Add OpenAPI source").click()
    page.wait_for_url("**/admin/tools/sources/*?done=added")
    assert page.get_by_role("status").inner_text() == "Tool source added."
    assert page.locator("#last-error").inner_text() == "none" and "UTC" in page.locator("#connected").inner_text()
    tools = page.get_by_role("region", name="Tools")
    assert "shop.getOrder" in tools.inner_text() and f"GET {shop.url}/orders/{{order_id}}" in tools.inner_text()
    assert SHOP_TOKEN not in page.content() and f"••••{SHOP_TOKEN[-4:]}" in page.content()

    tryout = page.get_by_role("region", name="Try a tool")
    tryout.get_by_label("Arguments").fill('{"order_id": 4411')
    tryout.get_by_role("button", name="Call the tool").click()
    assert page.get_by_role("alert").inner_text().startswith("arguments: not JSON")
    assert shop.requests == []
    tryout = page.get_by_role("region", name="Try a tool")
    tryout.get_by_label("Tool").select_option("shop.getOrder")
    tryout.get_by_label("Arguments").fill('{"order_id": "4411", "verbose": true}')
    tryout.get_by_role("button", name="Call the tool").click()
    assert json.loads(page.locator("#try-result").inner_text()) == {"order": "4411", "status": "shipped",
                                                                     "carrier": "DHL"}
    [request] = shop.requests
    assert request["path"] == "/orders/4411" and request["idempotency_key"].startswith("try:")
    page.get_by_role("region", name="Try a tool").get_by_label("Tool").select_option("shop.whoAmI")
    page.get_by_role("region", name="Try a tool").get_by_label("Arguments").fill("{}")
    page.get_by_role("button", name="Call the tool").click()
    assert json.loads(page.locator("#try-result").inner_text())["authorization"].endswith(f"••••{SHOP_TOKEN[-4:]}")
    assert SHOP_TOKEN not in page.content()

    page.get_by_role("link", name="← Tools").click()
    form = page.get_by_role("region", name="Add an MCP server")
    form.get_by_label("Source name").fill("crm")
    form.get_by_label("Server URL").fill(mcp_server.url)
    form.get_by_label("Header value").fill(f"Bearer {TOKEN}")
    form.get_by_role("button", name="Add MCP server").click()
    page.wait_for_url("**/admin/tools/sources/*?done=added")
    assert "crm.book_table" in page.get_by_role("region", name="Tools").inner_text()

    page.get_by_role("link", name="← Tools").click()
    rows = page.get_by_role("region", name="Tool sources").inner_text()
    assert "shop.getOrder, shop.whoAmI" in rows and "crm.book_table" in rows and "OpenAPI source" in rows
    page.get_by_role("region", name="Agents' tools").get_by_role("link").first.click()
    page.get_by_label("Use shop.getOrder", exact=True).check()
    page.get_by_label("Use crm.*", exact=True).check()
    page.get_by_label("Ask first for crm.*", exact=True).check()
    page.get_by_role("button", name="Save tools").click()
    page.wait_for_url("**?done=saved")
    assert page.get_by_label("Use shop.getOrder", exact=True).is_checked()
    assert not page.get_by_label("Ask first for shop.getOrder", exact=True).is_checked()
    agent = httpx.get(f"{console}/v1/agents/{settings.agent_id}", headers=ADMIN).json()
    assert agent["config"]["tools"] == [{"name": "crm.*", "confirm": True},
                                        {"name": "shop.getOrder", "confirm": False}]

    page.goto(f"{console}/admin/tools")
    page.get_by_role("link", name="shop").click()
    shop.token = "rotated-elsewhere"  # the shop changed its token: a refresh shows the refusal
    page.get_by_role("button", name="Refresh").click()
    page.wait_for_url("**?done=refreshed")
    assert "HTTP 401" in page.locator("#last-error").inner_text()
    page.get_by_role("button", name="Delete").click()
    page.wait_for_url("**/admin/tools?done=deleted")
    assert "shop" not in page.get_by_role("region", name="Tool sources").inner_text()

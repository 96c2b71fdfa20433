"""A proposed action in the web chat as a person sees it: the proposal comes with Yes / No buttons; pressing
Yes sends "Yes", the action is made once and the buttons go away."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer
from tests.fakes.mcp_server import FakeMcpServer

ADMIN = {"Authorization": "Bearer admin-secret"}


@pytest.fixture
def crm():
    fake = FakeMcpServer()
    with LiveServer(fake.app(), graceful_timeout_s=1) as server:
        fake.url = server.url + "/mcp"
        yield fake


@pytest.fixture
def chat_gateway(settings):
    with LiveServer(create_app(settings.model_copy(update={"outbound_allow_hosts": "127.0.0.1"}))) as server:
        yield server


def test_pressing_yes_on_a_proposal_books_once(page, chat_gateway, crm, fake_openai, settings):
    with httpx.Client(base_url=chat_gateway.url, timeout=30) as client:
        assert client.post("/api/tool-sources", headers=ADMIN, json={"name": "crm", "url": crm.url}).status_code == 201
        assert client.patch(f"/v1/agents/{settings.agent_id}", headers=ADMIN, json={
            "config": {"tools": [{"name": "crm.book_table", "confirm": True}]}}).status_code == 200
    fake_openai.auto_tool_call = ("crm__book_table", {"party_size": 4, "day": "Friday"})
    fake_openai.echo_tool_results = True
    page.goto(f"{chat_gateway.url}/chat")
    page.wait_for_selector("[data-role=agent]")  # the greeting
    page.get_by_label("Your message").fill("Book a table for four on Friday")
    page.get_by_role("button", name="Send").click()

    yes = page.get_by_role("button", name="Yes", exact=True)
    expect(yes).to_be_visible()
    expect(page.get_by_role("button", name="No", exact=True)).to_be_visible()
    assert crm.calls == []
    fake_openai.auto_tool_call = None
    yes.click()

    expect(page.locator("[data-role=agent]").last).to_have_text(
        "From the tools: Booked: a table for 4 on Friday, reference BK-1001.")
    expect(page.locator("[data-role=user]").last).to_have_text("Yes")
    expect(page.locator("[data-choices]")).to_have_count(0)  # pressed: the buttons are gone
    assert len(crm.calls) == 1

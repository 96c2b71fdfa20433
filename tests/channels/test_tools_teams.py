"""A proposed action on Teams: the proposal's Yes / No are an Adaptive Card's buttons; a press (Teams posts
the button's data as a message with no text) is the person's next message, and yes calls the tool once."""

from __future__ import annotations

import httpx
from pydantic import SecretStr

from channels.teams.cards import CARD_TYPE
from tests.channels import vendors
from tests.channels.conftest import settle, wait_until
from tests.channels.connections_support import ADMIN, SECRET_KEY, add, webhook_path
from tests.fakes.live_server import LiveServer
from tests.fakes.mcp_server import FakeMcpServer

TOKEN = "crm-token-teams-7731"


def test_a_proposal_on_teams_has_yes_and_no_buttons_and_a_press_books_once(fake_teams, fake_openai, channel_settings):
    from gateway.http.app import create_app

    mcp = FakeMcpServer(token=TOKEN)
    fake_teams.add_app(vendors.TEAMS_APP_ID, vendors.TEAMS_APP_PASSWORD)
    settings = channel_settings.model_copy(update={"secret_key": SecretStr(SECRET_KEY),
                                                   "outbound_allow_hosts": "127.0.0.1"})
    with LiveServer(mcp.app(), graceful_timeout_s=1) as tools, LiveServer(create_app(settings)) as live:
        live.services = live.server.config.app.state.services
        with httpx.Client(base_url=live.url, timeout=30) as client:
            assert client.post("/api/tool-sources", headers=ADMIN, json={
                "name": "crm", "url": tools.url + "/mcp",
                "headers": {"Authorization": f"Bearer {TOKEN}"}}).status_code == 201
            assert client.patch(f"/v1/agents/{settings.agent_id}", headers=ADMIN, json={
                "config": {"tools": [{"name": "crm.book_table", "confirm": True}]}}).status_code == 200
            path = webhook_path(add(client, kind="teams", name="Bookings", credentials={
                "app_id": vendors.TEAMS_APP_ID, "app_password": vendors.TEAMS_APP_PASSWORD}))
            fake_openai.auto_tool_call = ("crm__book_table", {"party_size": 4, "day": "Friday"})
            fake_openai.echo_tool_results = True
            token = fake_teams.activity_token(vendors.TEAMS_APP_ID)
            asked = vendors.teams_message("Book a table for four on Friday", service_url=fake_teams.service_url)
            assert vendors.post_teams(client, path, asked, token).status_code == 200
            wait_until(lambda: fake_teams.sent(), what="the proposal on Teams")
            [proposal] = fake_teams.sent()
            [card] = proposal["attachments"]
            assert card["contentType"] == CARD_TYPE
            assert [(a["type"], a["title"], a["data"]) for a in card["content"]["actions"]] == [
                ("Action.Submit", "Yes", {"choice": "Yes"}), ("Action.Submit", "No", {"choice": "No"})]
            assert mcp.calls == []
            fake_openai.auto_tool_call = None

            press = vendors.teams_message("", service_url=fake_teams.service_url, value={"choice": "Yes"})
            del press["text"]  # a card's Action.Submit comes as a message with no text, its data as value
            assert vendors.post_teams(client, path, press, token).status_code == 200
            wait_until(lambda: len(fake_teams.sent()) == 2, what="the booking's reply")
            settle(live)

    answer = fake_teams.sent()[1]
    assert answer["text"] == "From the tools: Booked: a table for 4 on Friday, reference BK-1001."
    assert "attachments" not in answer  # no choices on an answer
    assert answer["_reply_to"] == press["id"]
    assert [(c["tool"], c["arguments"]) for c in mcp.calls] == [("book_table", {"party_size": 4, "day": "Friday"})]

"""A confirm tool on Slack: the proposal carries Block Kit Yes / No buttons (in place of the rating buttons);
a press of Yes (a signed ``block_actions`` interaction at the events URL, through slack-bolt's path) books
exactly once even when pressed twice, and the message's buttons make way for the choice; a press of No
books nothing."""

from __future__ import annotations

import httpx
from cryptography.fernet import Fernet
from pydantic import SecretStr

from tests.channels import vendors
from tests.channels.conftest import settle, wait_until
from tests.fakes.live_server import LiveServer
from tests.fakes.mcp_server import FakeMcpServer

ADMIN = {"Authorization": "Bearer admin-secret"}
BOOKED = "From the tools: Booked: a table for 4 on Friday, reference BK-1001."


def _buttons(posted: dict) -> list[tuple[str, str, str]]:
    return [(e["text"]["text"], e["action_id"], e["value"]) for b in posted.get("blocks") or []
            if b["type"] == "actions" for e in b["elements"]]


def _propose(client: httpx.Client, fake_slack, fake_openai, channel: str, user: str) -> tuple[dict, str]:
    fake_openai.auto_tool_call = ("crm__book_table", {"party_size": 4, "day": "Friday"})
    before = len(fake_slack.posted())
    event = vendors.slack_event("Book a table for four on Friday", kind="message", channel=channel, user=user)
    assert vendors.post_slack(client, vendors.slack_envelope(event)).status_code == 200
    wait_until(lambda: len(fake_slack.posted()) > before, what="the proposal on Slack")
    fake_openai.auto_tool_call = None
    return fake_slack.posted()[-1], fake_slack.sent_ts[-1]


def _press(client: httpx.Client, posted: dict, ts: str, choice: str, user: str) -> None:
    [action] = [a for _, a, value in _buttons(posted) if value == choice]
    press = vendors.slack_block_actions(posted, ts, action, user=user)
    assert vendors.post_slack_interaction(client, press).status_code == 200


def test_slack_yes_and_no_buttons_act_as_the_customers_answer(fake_slack, fake_openai, channel_settings):
    from gateway.http.app import create_app

    mcp = FakeMcpServer()
    settings = channel_settings.model_copy(update={"secret_key": SecretStr(Fernet.generate_key().decode()),
                                                   "outbound_allow_hosts": "127.0.0.1", "feedback_buttons": True})
    with LiveServer(mcp.app(), graceful_timeout_s=1) as tools, LiveServer(create_app(settings)) as live:
        live.services = live.server.config.app.state.services
        with httpx.Client(base_url=live.url, timeout=30) as client:
            assert client.post("/api/tool-sources", headers=ADMIN, json={
                "name": "crm", "url": tools.url + "/mcp"}).status_code == 201
            assert client.patch(f"/v1/agents/{settings.agent_id}", headers=ADMIN, json={
                "config": {"tools": [{"name": "crm.book_table", "confirm": True}]}}).status_code == 200
            fake_openai.echo_tool_results = True

            # Yes, pressed twice (a double click before the message is updated): booked once, answered once
            proposal, ts = _propose(client, fake_slack, fake_openai, "D0DMADA01", "U0ADA0001")
            assert _buttons(proposal) == [("Yes", "sb_choice_0", "Yes"), ("No", "sb_choice_1", "No")]
            assert "Before I do this, please confirm" in proposal["text"] and mcp.calls == []
            _press(client, proposal, ts, "Yes", "U0ADA0001")
            _press(client, proposal, ts, "Yes", "U0ADA0001")
            wait_until(lambda: BOOKED in fake_slack.sent_texts(), what="the booking's reply")
            settle(live)
            answers = fake_slack.posted()[1:]
            assert [p["text"] for p in answers] == [BOOKED]
            assert not [b for b in _buttons(answers[0]) if b[1].startswith("sb_choice_")]  # no choices on an answer
            [update] = fake_slack.recorder.received("chat.update")
            assert update.params["ts"] == ts and update.params["channel"] == "D0DMADA01"
            assert "actions" not in [b["type"] for b in update.params["blocks"]]
            assert update.params["blocks"][-1]["elements"][0]["text"] == "You chose: *Yes*"

            # No: nothing booked
            proposal, ts = _propose(client, fake_slack, fake_openai, "D0DMBOB01", "U0BOB0001")
            _press(client, proposal, ts, "No", "U0BOB0001")
            wait_until(lambda: len(fake_slack.recorder.received("chat.update")) == 2, what="the No press taken")
            wait_until(lambda: len(fake_slack.posted()) == 4, what="the answer to No")
            settle(live)

    assert [(c["tool"], c["arguments"]) for c in mcp.calls] == [("book_table", {"party_size": 4, "day": "Friday"})]

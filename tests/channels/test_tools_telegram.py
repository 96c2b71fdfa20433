"""Tools on an inbox channel: a Telegram message makes the model call ``crm.book_table`` on a real MCP
server; the reply sent to Telegram carries the result; Telegram retrying the same update (same
update_id) books nothing more and sends nothing more."""

from __future__ import annotations

import json

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


def test_a_proposal_on_telegram_has_yes_and_no_buttons_and_a_press_books_once(fake_telegram, fake_openai,
                                                                               channel_settings):
    from gateway.http.app import create_app

    mcp = FakeMcpServer(token=TOKEN)
    settings = channel_settings.model_copy(update={"secret_key": SecretStr(Fernet.generate_key().decode()),
                                                   "outbound_allow_hosts": "127.0.0.1"})
    with LiveServer(mcp.app(), graceful_timeout_s=1) as tools, LiveServer(create_app(settings)) as live:
        live.services = live.server.config.app.state.services
        with httpx.Client(base_url=live.url, timeout=30) as client:
            assert client.post("/api/tool-sources", headers=ADMIN, json={
                "name": "crm", "url": tools.url + "/mcp",
                "headers": {"Authorization": f"Bearer {TOKEN}"}}).status_code == 201
            assert client.patch(f"/v1/agents/{settings.agent_id}", headers=ADMIN, json={
                "config": {"tools": [{"name": "crm.book_table", "confirm": True}]}}).status_code == 200
            fake_openai.auto_tool_call = ("crm__book_table", {"party_size": 4, "day": "Friday"})
            fake_openai.echo_tool_results = True
            message = vendors.telegram_message("Book a table for four on Friday")
            assert vendors.post_telegram(client, vendors.telegram_update(message)).status_code == 200
            wait_until(lambda: fake_telegram.sent_texts(), what="the proposal on Telegram")
            [proposal] = fake_telegram.recorder.received("sendMessage")
            keyboard = json.loads(proposal.params["reply_markup"])["inline_keyboard"]
            assert [[(b["text"], b["callback_data"]) for b in row] for row in keyboard] == [[("Yes", "ch:Yes"),
                                                                                            ("No", "ch:No")]]
            assert mcp.calls == []
            fake_openai.auto_tool_call = None

            sent = {"message_id": 9001, "date": message["date"], "chat": message["chat"], "text": "Before I do this",
                    "from": {"id": 42, "is_bot": True, "first_name": "Switchboard"}}
            press = {"id": "cbq-771", "from": message["from"], "chat_instance": "ci-1", "data": "ch:Yes",
                     "message": sent}
            assert vendors.post_telegram(client, vendors.telegram_update(press, kind="callback_query")).status_code \
                == 200
            wait_until(lambda: len(fake_telegram.sent_texts()) == 2, what="the booking's reply")
            settle(live)

    booked = "From the tools: Booked: a table for 4 on Friday, reference BK-1001."
    assert fake_telegram.sent_texts()[1] == booked
    answer_markup = fake_telegram.recorder.received("sendMessage")[1].params.get("reply_markup", "{}")
    answer_buttons = [b for row in json.loads(answer_markup).get("inline_keyboard", []) for b in row]
    assert not [b for b in answer_buttons if b["callback_data"].startswith("ch:")]  # no choices on an answer
    assert [(c["tool"], c["arguments"]) for c in mcp.calls] == [("book_table", {"party_size": 4, "day": "Friday"})]
    [answered] = fake_telegram.recorder.received("answerCallbackQuery")
    assert answered.params["callback_query_id"] == "cbq-771"  # Telegram stops the button's spinner
    [edited] = fake_telegram.recorder.received("editMessageReplyMarkup")
    assert int(edited.params["message_id"]) == 9001 and int(edited.params["chat_id"]) == message["chat"]["id"]
    assert "inline_keyboard" not in edited.params.get("reply_markup", "")  # the keyboard is taken off

"""What the API says about a connection's traffic: each conversation row names the connection it
came through, and the environment's channels (connection ``default``) record their last message in."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from tests.channels import vendors
from tests.channels.conftest import settle
from tests.channels.connections_support import ADMIN, SECRET_KEY, add, post_update


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY)}


def test_conversation_rows_name_their_connection_as_the_detail_does(client, live, fake_telegram, fake_openai):
    token = fake_telegram.add_bot(7100031, "rows_bot")
    bot = add(client, kind="telegram", name="Rows", credentials={"bot_token": token})
    [registered] = [c for c in fake_telegram.recorder.received("setWebhook") if c.params["_bot"] == "rows_bot"]
    update = vendors.telegram_update(vendors.telegram_message("Do you rent kayaks?"))
    assert post_update(client, bot, update, registered.params["secret_token"]).status_code == 200
    vendors.post_twilio(client, "/channels/twilio/sms", vendors.sms_params("Do you rent kayaks?"))
    settle(live)
    rows = client.get("/api/conversations", headers=ADMIN).json()["conversations"]
    by_channel = {r["channel"]: r for r in rows}
    assert by_channel["telegram"]["connection"] == bot["id"]
    assert by_channel["twilio_sms"]["connection"] is None  # the environment's number: no stored connection
    detail = client.get(f"/api/conversations/{by_channel['telegram']['id']}", headers=ADMIN).json()
    assert detail["conversation"]["connection"] == by_channel["telegram"]["connection"]


def test_the_environment_sms_number_records_its_last_message_in(client, live, fake_openai):
    def default(kind: str) -> dict:
        listed = client.get("/api/connections", headers=ADMIN).json()["connections"]
        return next(c for c in listed if c["id"] == "default" and c["kind"] == kind)

    assert default("twilio_sms")["status"]["last_inbound_at"] is None
    answer = vendors.post_twilio(client, "/channels/twilio/sms", vendors.sms_params("Are you open on Sunday?"))
    assert answer.status_code == 200
    settle(live)
    assert default("twilio_sms")["status"]["last_inbound_at"] is not None
    assert default("telegram")["status"]["last_inbound_at"] is None  # only the channel the message came in on
    telegram = vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("hi")))
    assert telegram.status_code == 200
    settle(live)
    assert default("telegram")["status"]["last_inbound_at"] is not None

"""The environment-configured channels (the read-only connection ``default``) sit behind the same vendor
boundary as a connection: a vendor that echoes the bot token in its errors gets it into no stored reply,
Redis value or log record — only its masked form."""

from __future__ import annotations

import logging

from gateway.connections.model import mask
from gateway.core.models import Role
from tests.channels import vendors
from tests.channels.conftest import settle
from tests.channels.test_secrets_exposure import _everything_in
from tests.fakes.telegram_api import TOKEN


def test_the_environment_bots_token_echoed_by_telegram_is_stored_and_logged_masked(
        client, live, fake_telegram, fake_openai, stored, caplog):
    caplog.set_level(logging.DEBUG)
    echo = f"bot_token={TOKEN}"
    fake_telegram.recorder.fail("sendChatAction", 400, description=f"Bad Request: typing refused for {echo}")
    fake_telegram.recorder.fail("sendMessage", 400, times=3, description=f"Bad Request: chat not found for {echo}")
    fake_openai.script_reply("Your order ships tomorrow.")

    assert vendors.post_telegram(client, vendors.telegram_update(
        vendors.telegram_message("where is my order?"))).status_code == 200
    settle(live)

    question, reply = stored.messages(f"telegram:{vendors.USER_ID}")
    assert question.text == "where is my order?" and reply.role is Role.AGENT
    assert reply.delivery.value == "failed" and mask(TOKEN) in reply.delivery_error, reply
    secrets = [TOKEN, TOKEN.split(":", 1)[1]]
    redis_values = _everything_in(stored)
    logs = "\n".join(f"{r.getMessage()} {r.exc_text or ''} {r.args!r}" for r in caplog.records)
    assert "chat not found" in redis_values  # the vendor's error was kept, with the token masked
    leaks = sorted({(where, secret) for where, text in {"redis": redis_values, "logs": logs}.items()
                    for secret in secrets if secret in text})
    assert leaks == []

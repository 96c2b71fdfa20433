"""Issue 41's Done-when, in Chromium: a visitor rates a widget reply 👎 with a comment, a Telegram user
presses 👍 under the bot's reply (the fake Telegram's callback query), an SMS customer answers the closing
question with 4 — and the operator's Insights screen shows the three within 2 s, with the right counts."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from playwright.sync_api import expect
from pydantic import SecretStr

from gateway.http.app import create_app
from gateway.services import Services
from tests.admin_ui.conftest import PASSWORD
from tests.channels import vendors
from tests.channels.conftest import wait_until
from tests.fakes import telegram_api, twilio_api
from tests.fakes.live_server import LiveServer
from tests.fakes.telegram_api import FakeTelegram
from tests.fakes.twilio_api import FakeTwilio

CSAT = "How did we do? Reply with a number from 1 (bad) to 5 (great)."


@pytest.fixture
def vendors_up() -> Iterator[tuple[FakeTelegram, FakeTwilio]]:
    fakes = FakeTelegram(), FakeTwilio()
    with LiveServer(fakes[0].app()) as telegram, LiveServer(fakes[1].app()) as twilio:
        fakes[0].url, fakes[1].url = telegram.url, twilio.url
        yield fakes


@pytest.fixture
def gateway_with_channels(settings, vendors_up) -> Iterator[LiveServer]:
    telegram, twilio = vendors_up
    configured = settings.model_copy(update={
        "admin_password": SecretStr(PASSWORD), "admin_user": "root", "public_url": vendors.PUBLIC_URL,
        "telegram_bot_token": SecretStr(telegram_api.TOKEN), "telegram_api_base": telegram.url,
        "telegram_webhook_secret": SecretStr(vendors.TELEGRAM_SECRET),
        "twilio_account_sid": twilio_api.ACCOUNT_SID, "twilio_auth_token": SecretStr(twilio_api.AUTH_TOKEN),
        "twilio_api_base": twilio.url, "twilio_from_number": twilio_api.FROM_NUMBER,
        "csat_prompt": CSAT, "csat_after_s": 1,
    })
    # the in-process RQ worker runs the closing question's timer
    with LiveServer(create_app(configured, services=Services.build(configured, run_worker=True))) as server:
        yield server


def _figure(page, name: str):
    return page.get_by_role("row", name=name)


def test_three_ratings_from_three_channels_reach_the_insights_screen(page, gateway_with_channels, vendors_up,
                                                                     fake_openai):
    gateway, (telegram, twilio) = gateway_with_channels, vendors_up
    client = httpx.Client(base_url=gateway.url, timeout=20)

    # the operator signs in first: the screen is a reload away later
    page.goto(f"{gateway.url}/admin/insights?range=today")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Insights")).to_be_visible()
    expect(_figure(page, "Rated 👍 / 👎")).to_contain_text("0 / 0")

    # an SMS customer asks; once the conversation is idle the closing question goes out
    fake_openai.script_reply("We open at nine.")
    vendors.post_twilio(client, "/channels/twilio/sms", vendors.sms_params("When do you open?"))

    # a Telegram user asks, and the reply comes with the keyboard
    fake_openai.script_reply("Delivery takes two days.")
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("How long is delivery?")))
    sent = wait_until(lambda: telegram.sent, what="the Telegram reply")[-1]
    [up, _] = [b["callback_data"] for b in sent["reply_markup"]["inline_keyboard"][0]]

    # a visitor rates a widget reply 👎 with a comment, on a site of their own
    site = FastAPI()

    @site.get("/")
    async def home() -> HTMLResponse:
        return HTMLResponse("<!doctype html><html><head><title>Shop</title></head><body><h1>Our shop</h1>"
                            f'<script src="{gateway.url}/widget.js" async></script></body></html>')

    fake_openai.script_reply("Returns are free.")
    visitor = page.context.new_page()
    with LiveServer(site) as other:
        visitor.goto(other.url)
        visitor.get_by_role("button", name="Open chat").click()
        visitor.get_by_label("Your message").fill("Are returns free?")
        visitor.get_by_role("button", name="Send", exact=True).click()
        expect(visitor.locator("[data-role=agent]").last).to_have_text("Returns are free.")
        visitor.locator("[data-rate]").get_by_role("button", name="Not helpful").click()
        visitor.get_by_label("What was wrong with this answer? (optional)").fill("Not for sale items!")
        visitor.get_by_role("button", name="Send feedback").click()
        expect(visitor.locator(".sb-rate-note")).to_have_text("Thanks for your feedback.")
    visitor.close()

    # the Telegram user presses 👍; the SMS customer answers the closing question with 4
    press = vendors.telegram_update(vendors.telegram_press(sent, up), kind="callback_query")
    assert vendors.post_telegram(client, press).status_code == 200
    wait_until(lambda: CSAT in twilio.sent_texts(), timeout=30, what="the closing question")
    assert vendors.post_twilio(client, "/channels/twilio/sms", vendors.sms_params("4")).status_code == 200
    done = time.monotonic()

    def shown() -> bool:
        page.reload()
        rows = {name: _figure(page, name).inner_text() for name in ("Rated 👍 / 👎", "Comments", "CSAT (1-5)")}
        return ("1 / 1" in rows["Rated 👍 / 👎"] and rows["Comments"].endswith("1")
                and "4.00 from 1 answer" in rows["CSAT (1-5)"])

    while not shown():
        assert time.monotonic() - done < 2.0, "the Insights screen did not show the three ratings within 2 s"
        time.sleep(0.1)
    expect(page.locator("[data-comments]")).to_contain_text("Not for sale items!")
    assert len(fake_openai.chat_requests()) == 3  # the CSAT answer started no turn
    assert [c.params["text"] for c in telegram.recorder.received("answerCallbackQuery")] == [
        "Thanks for your feedback!"]

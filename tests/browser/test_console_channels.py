"""The Channels screen in a real Chromium: an admin adds a Telegram bot by its token, sees its
@username and webhook URL, and the bot answers; the token never shows on a page."""

from __future__ import annotations

import time

import httpx

from tests.admin_ui.conftest import PASSWORD
from tests.channels import vendors
from tests.channels.connections_support import channels_console, telegram_only  # noqa: F401  (fixtures)


def test_add_a_telegram_bot_in_the_console_and_it_answers(page, channels_console, telegram_only):  # noqa: F811
    console, fake_telegram = channels_console, telegram_only
    token = fake_telegram.add_bot(7400001, "console_bot")
    page.goto(f"{console.url}/admin/channels")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{console.url}/admin/channels")

    form = page.get_by_role("region", name="Add a Telegram bot")
    form.get_by_label("Name").fill("Front desk")
    form.get_by_label("Bot token").fill(token)
    assert form.get_by_label("Agent").input_value() == ""  # the channels' agent unless another is chosen
    form.get_by_role("button", name="Add Telegram bot").click()
    page.wait_for_url("**/admin/channels/*?done=added")
    assert page.get_by_role("status").inner_text() == "Connection added."
    assert page.locator("#account").inner_text() == "@console_bot"
    webhook_url = page.locator("#webhook-url").inner_text()
    public_url = console.server.config.app.state.services.settings.public_url
    assert webhook_url.startswith(f"{public_url}/channels/telegram/") and webhook_url.endswith("/webhook")
    assert token not in page.content() and f"••••{token[-4:]}" in page.content()

    [registered] = fake_telegram.recorder.received("setWebhook")
    assert registered.params["url"] == webhook_url
    path = "/" + webhook_url.split("/", 3)[3]
    update = vendors.telegram_update(vendors.telegram_message("Are you open today?"))
    answer = httpx.post(console.url + path, json=update,
                        headers={"X-Telegram-Bot-Api-Secret-Token": registered.params["secret_token"]})
    assert answer.status_code == 200
    deadline = time.monotonic() + 15
    while not fake_telegram.sent_by("console_bot") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake_telegram.sent_by("console_bot") == ["echo: Are you open today?"]

    page.goto(f"{console.url}/admin/channels")
    row = page.get_by_role("row", name="Front desk")
    assert "Enabled: Telegram accepted the token" in row.inner_text() and "@console_bot" in row.inner_text()
    assert token not in page.content()

    page.get_by_role("link", name="Front desk").click()
    page.get_by_role("button", name="Disable").click()
    page.wait_for_url("**?done=disabled")
    assert httpx.post(console.url + path, json=vendors.telegram_update(vendors.telegram_message("hello?")),
                      headers={"X-Telegram-Bot-Api-Secret-Token": registered.params["secret_token"]}
                      ).status_code == 404


def test_the_channel_page_says_one_state_after_every_action(page, channels_console, telegram_only):  # noqa: F811
    console, fake_telegram = channels_console, telegram_only
    token = fake_telegram.add_bot(7400002, "moody_console_bot")
    page.goto(f"{console.url}/admin/channels")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{console.url}/admin/channels")

    # Telegram is down when the bot is added: saved disabled, and nothing claims it was registered
    fake_telegram.recorder.fail("getMe", 502, description="Bad Gateway: first outage")
    form = page.get_by_role("region", name="Add a Telegram bot")
    form.get_by_label("Name").fill("Moody desk")
    form.get_by_label("Bot token").fill(token)
    form.get_by_role("button", name="Add Telegram bot").click()
    page.wait_for_url("**/admin/channels/*?done=check_failed")
    state = page.locator("#state").inner_text()
    assert state.startswith("Disabled: the check with Telegram failed") and "first outage" in state
    assert page.get_by_role("alert").inner_text() == state
    assert page.locator("#webhook-note").inner_text() == "Not registered with Telegram yet: it is when a check passes."
    assert "first outage" in page.locator("#last-error").inner_text()

    # Enable while Telegram is still down: no green "enabled", the new error everywhere, the old one gone
    fake_telegram.recorder.fail("getMe", 503, description="Service Unavailable: second outage")
    page.get_by_role("button", name="Enable").click()
    page.wait_for_url("**?done=check_failed")
    assert page.get_by_role("status").count() == 0
    for shown in (page.get_by_role("alert").inner_text(), page.locator("#state").inner_text(),
                  page.locator("#last-error").inner_text()):
        assert "second outage" in shown and "first outage" not in shown
    assert page.get_by_role("button", name="Enable").is_visible()

    # Verify again with a revoked token: the refusal is the state and the last error
    del fake_telegram.bots[token]
    try:
        page.get_by_role("button", name="Verify again").click()
        page.wait_for_load_state()
        assert page.get_by_role("alert").inner_text() == "credentials.bot_token: Telegram refused the token"
        assert "Telegram refused the token" in page.locator("#state").inner_text()
        assert "Telegram refused the token" in page.locator("#last-error").inner_text()
        assert "outage" not in page.locator("#last-error").inner_text()
    finally:
        fake_telegram.bots[token] = (7400002, "moody_console_bot")

    page.get_by_role("button", name="Verify again").click()
    page.wait_for_url("**?done=verified")
    assert page.get_by_role("status").inner_text() == "Verified again."
    assert page.locator("#state").inner_text().startswith("Enabled: Telegram accepted the token")
    assert page.locator("#last-error").inner_text() == "none"
    assert page.locator("#webhook-note").inner_text().startswith("Registered with Telegram at the last check")
    assert page.get_by_role("button", name="Disable").is_visible()

"""The operator's main job in a real Chromium, with the visitor's web chat open in a second browser
context: the conversation appears in the list live, its trace expands, "Take over" silences the bot,
the visitor's message appears live, the operator's "Reply" reaches the chat page, "Hand back"
brings the bot back."""

from __future__ import annotations

import time

from playwright.sync_api import expect

from tests.admin_ui.conftest import PASSWORD, console  # noqa: F401  (the console fixture)


def _chat(page, text: str) -> None:
    page.get_by_label("Your message").fill(text)
    page.get_by_role("button", name="Send").click()


def test_take_over_a_web_chat_reply_and_hand_back(console, browser, page):  # noqa: F811
    page.goto(f"{console.url}/admin/conversations")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{console.url}/admin/conversations")
    expect(page.locator("[data-live=on]")).to_have_count(1)  # the event stream is open

    visitor_context = browser.new_context()
    try:
        chat = visitor_context.new_page()
        chat.goto(f"{console.url}/chat")
        chat.wait_for_selector("[data-role=agent]")  # the greeting
        _chat(chat, "hello")
        expect(chat.locator("[data-role=agent]").last).to_have_text("echo: hello")

        # The conversation shows up in the list without a reload.
        stored = time.monotonic()
        row = page.get_by_role("link", name="echo: hello")
        row.wait_for(timeout=5000)
        assert time.monotonic() - stored < 5
        row.click()
        page.get_by_text("Turn trace").first.click()
        expect(page.get_by_role("table", name="Stages").first).to_be_visible()

        page.get_by_role("button", name="Take over").click()
        expect(page.get_by_label("Reply")).to_be_visible()
        expect(page.locator("[data-live=on]")).to_have_count(1)
        _chat(chat, "is a person there?")
        expect(page.locator("#transcript")).to_contain_text("is a person there?")  # live, no reload
        expect(chat.get_by_role("button", name="Send")).to_be_enabled()
        assert chat.locator("[data-role=agent]").last.inner_text() == "echo: hello"  # the bot stayed silent

        page.get_by_label("Reply").fill("Hi, this is a person. How can I help?")
        page.get_by_role("button", name="Send").click()
        expect(chat.locator("[data-role=operator]").last).to_have_text("Hi, this is a person. How can I help?")

        page.get_by_role("button", name="Hand back").click()
        expect(page.get_by_role("button", name="Take over")).to_be_visible()
        _chat(chat, "thanks")
        expect(chat.locator("[data-role=agent]").last).to_have_text("echo: thanks")
    finally:
        visitor_context.close()

"""Take-over as the visitor sees it: the web chat says that a person joined, names them on their replies,
says when they left, and shows the same after a reload."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect
from pydantic import SecretStr

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer

PASSWORD = "sam's long console password"


@pytest.fixture
def console_with_sam(settings) -> Iterator[LiveServer]:
    configured = settings.model_copy(update={"admin_password": SecretStr(PASSWORD), "admin_user": "sam"})
    with LiveServer(create_app(configured)) as server:
        yield server


def test_the_visitor_sees_sam_join_reply_by_name_and_leave(console_with_sam, browser, page):
    url = console_with_sam.url
    visitor_context = browser.new_context()
    try:
        chat = visitor_context.new_page()
        chat.goto(f"{url}/chat")
        chat.wait_for_selector("[data-role=agent]")
        chat.get_by_label("Your message").fill("hello")
        chat.get_by_role("button", name="Send").click()
        expect(chat.locator("[data-role=agent]").last).to_have_text("echo: hello")

        page.goto(f"{url}/admin/conversations")
        page.get_by_label("Username").fill("sam")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("link", name="echo: hello").click()
        page.get_by_role("button", name="Take over").click()
        expect(chat.locator("[data-role=notice]")).to_have_text(["Sam joined the conversation"])  # live

        page.get_by_label("Reply").fill("Hi, Sam here. Your order left today.")
        page.get_by_role("button", name="Send").click()
        expect(chat.locator("[data-role=operator]").last).to_have_text("Hi, Sam here. Your order left today.")
        expect(chat.locator("[data-author]")).to_have_text(["Sam"])
        page.get_by_role("button", name="Hand back").click()
        expect(chat.locator("[data-role=notice]").last).to_have_text("Sam left the conversation")

        chat.reload()
        chat.wait_for_selector("[data-role=operator]")
        expect(chat.locator("[data-role=notice]")).to_have_text(["Sam joined the conversation",
                                                                 "Sam left the conversation"])
        expect(chat.locator("[data-author]")).to_have_text(["Sam"])
        # The console's own note ("sam took over ...; the assistant is paused.") is not the visitor's.
        expect(chat.locator(".sb-log")).not_to_contain_text("assistant is paused")
    finally:
        visitor_context.close()

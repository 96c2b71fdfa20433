"""The web chat as a person uses it: the /chat page and the widget embedded on another site."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from playwright.sync_api import expect

from tests.fakes.live_server import LiveServer

REPLY = "We are open from nine to five, Monday to Friday, and until noon on Saturdays."


def _send(page, text):
    page.get_by_label("Your message").fill(text)
    page.get_by_role("button", name="Send").click()


def test_chat_page_streams_the_reply(page, gateway, fake_openai):
    fake_openai.chunk_delay_s = 0.03
    fake_openai.script_reply(REPLY)
    page.goto(f"{gateway.url}/chat")
    page.wait_for_selector("[data-role=agent]")  # the greeting
    _send(page, "When are you open?")
    user = page.locator("[data-role=user]")
    assert user.last.inner_text() == "When are you open?"
    agent = page.locator("[data-role=agent]").last
    # Part of the reply is on screen before all of it: it is streamed, not delivered at once.
    page.wait_for_function(
        "n => { const a = [...document.querySelectorAll('[data-role=agent]')].pop();"
        " return a && a.textContent.length > 0 && a.textContent.length < n; }",
        arg=len(REPLY),
    )
    page.wait_for_function(
        "t => [...document.querySelectorAll('[data-role=agent]')].pop().textContent === t", arg=REPLY
    )
    assert agent.inner_text() == REPLY
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    assert fake_openai.chat_requests()[0]["body"]["stream"] is True


def test_a_message_sent_while_the_session_is_still_being_made_waits_for_it(page, gateway, fake_openai):
    def slow_session(route):
        if route.request.method == "POST":
            page.wait_for_timeout(800)  # the gateway is slow to open the visitor's session
        route.continue_()

    page.route("**/api/chat/sessions", slow_session)
    page.goto(f"{gateway.url}/chat")
    send = page.get_by_role("button", name="Send")
    expect(send).to_be_disabled()  # nowhere to send it yet
    page.get_by_label("Your message").fill("Are you open today?")
    send.click()  # waits until the session is there
    expect(page.locator("[data-role=agent]").last).to_have_text("echo: Are you open today?")
    expect(page.get_by_role("alert")).to_have_count(0)  # no error shown
    assert [m["content"] for m in fake_openai.chat_requests()[-1]["body"]["messages"][1:]] == ["Are you open today?"]


def test_chat_page_shows_errors_and_keeps_the_text(page, gateway):
    page.goto(f"{gateway.url}/chat")
    page.wait_for_selector("[data-role=agent]")
    _send(page, "x" * 4001)
    alert = page.get_by_role("alert")
    alert.wait_for()
    page.wait_for_function("() => document.querySelector('[role=alert]').textContent.includes('limit')")
    assert "4000" in alert.inner_text()
    assert page.get_by_label("Your message").input_value() == "x" * 4001


def test_widget_embedded_on_another_site_keeps_the_session_across_reloads(page, gateway, fake_openai):
    site = FastAPI()

    @site.get("/")
    async def home() -> HTMLResponse:
        return HTMLResponse(
            "<!doctype html><html><head><title>Bakery</title></head><body><h1>Our bakery</h1>"
            f'<script src="{gateway.url}/widget.js" async></script></body></html>'
        )

    fake_openai.script_reply("Sourdough is ready at 8am.")
    with LiveServer(site) as other:
        page.goto(other.url)
        page.get_by_role("button", name="Open chat").click()
        _send(page, "When is sourdough ready?")
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-role=agent]')].pop().textContent"
            " === 'Sourdough is ready at 8am.'"
        )
        page.reload()
        page.get_by_role("button", name="Open chat").click()
        page.wait_for_function("() => document.querySelectorAll('[data-role=user]').length === 1")
        texts = page.locator(".sb-msg").all_inner_texts()
        assert texts == ["When is sourdough ready?", "Sourdough is ready at 8am."]

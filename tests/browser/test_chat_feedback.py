"""A visitor rates the bot's replies in the widget (embedded on another site) and on the /chat page; the
ratings and the comment reach ``GET /api/insights``."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from playwright.sync_api import expect

from tests.fakes.live_server import LiveServer

ADMIN = {"Authorization": "Bearer admin-secret"}


def _send(page, text):
    page.get_by_label("Your message").fill(text)
    page.get_by_role("button", name="Send", exact=True).click()


def _insights(gateway) -> dict:
    answer = httpx.get(f"{gateway.url}/api/insights", headers=ADMIN, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_widget_visitor_rates_a_reply_down_with_a_comment_then_changes_it(page, gateway, fake_openai):
    site = FastAPI()

    @site.get("/")
    async def home() -> HTMLResponse:
        return HTMLResponse("<!doctype html><html><head><title>Bakery</title></head><body><h1>Our bakery</h1>"
                            f'<script src="{gateway.url}/widget.js" async></script></body></html>')

    fake_openai.script_reply("Sourdough is ready at 8am.")
    with LiveServer(site) as other:
        page.goto(other.url)
        page.get_by_role("button", name="Open chat").click()
        _send(page, "When is sourdough ready?")
        expect(page.locator("[data-role=agent]").last).to_have_text("Sourdough is ready at 8am.")
        rating = page.locator("[data-rate]")
        expect(rating).to_have_count(1)  # under the reply, not under the greeting
        rating.get_by_role("button", name="Not helpful").click()
        comment = page.get_by_label("What was wrong with this answer? (optional)")
        comment.fill("It is ready at 7 on Saturdays.")
        page.get_by_role("button", name="Send feedback").click()
        expect(rating.locator(".sb-rate-note")).to_have_text("Thanks for your feedback.")
        expect(comment).to_have_count(0)
        expect(rating.get_by_role("button", name="Not helpful")).to_have_attribute("aria-pressed", "true")

        report = _insights(gateway)
        assert report["feedback"] == {"up": 0, "down": 1, "comments": 1}
        [said] = report["recent_comments"]
        assert (said["rating"], said["comment"]) == ("down", "It is ready at 7 on Saturdays.")

        page.reload()  # the transcript's reply can be rated too: the visitor changes their mind
        page.get_by_role("button", name="Open chat").click()
        rating = page.locator("[data-rate]")
        expect(rating).to_have_count(1)
        rating.get_by_role("button", name="Helpful", exact=True).click()
        expect(rating.get_by_role("button", name="Helpful", exact=True)).to_have_attribute("aria-pressed", "true")
        assert _insights(gateway)["feedback"] == {"up": 1, "down": 0, "comments": 0}


def test_the_chat_page_rates_a_streamed_reply_up(page, gateway, fake_openai):
    fake_openai.script_reply("We open at nine.")
    page.goto(f"{gateway.url}/chat")
    page.wait_for_selector("[data-role=agent]")  # the greeting
    _send(page, "When do you open?")
    expect(page.locator("[data-role=agent]").last).to_have_text("We open at nine.")
    page.locator("[data-rate]").get_by_role("button", name="Helpful", exact=True).click()
    expect(page.locator(".sb-rate-note")).to_have_text("Thanks for your feedback.")
    expect(page.locator(".sb-comment")).to_have_count(0)  # a 👍 asks for nothing more
    report = _insights(gateway)
    assert report["feedback"] == {"up": 1, "down": 0, "comments": 0}
    assert report["conversations"] == 1 and report["tokens"]["prompt"] > 0

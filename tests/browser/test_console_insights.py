"""In Chromium: a visitor rates a /chat reply 👎 with a comment; the operator's Insights screen shows the
rating, the comment and the conversation in its chart (drawn server-side, within the console's CSP)."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.admin_ui.conftest import PASSWORD, console  # noqa: F401  (the console fixture)


def test_a_visitors_thumbs_down_shows_on_the_insights_screen(page, console, fake_openai):  # noqa: F811
    fake_openai.script_reply("We deliver on Tuesdays.")
    page.goto(f"{console.url}/chat")
    page.wait_for_selector("[data-role=agent]")
    page.get_by_label("Your message").fill("When do you deliver?")
    page.get_by_role("button", name="Send", exact=True).click()
    expect(page.locator("[data-role=agent]").last).to_have_text("We deliver on Tuesdays.")
    page.get_by_role("button", name="Not helpful").click()
    page.get_by_label("What was wrong with this answer? (optional)").fill("Also on Fridays!")
    page.get_by_role("button", name="Send feedback").click()
    expect(page.locator(".sb-rate-note")).to_have_text("Thanks for your feedback.")

    page.goto(f"{console.url}/admin/insights?range=today")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{console.url}/admin/insights?range=today")
    expect(page.get_by_role("heading", name="Insights")).to_be_visible()
    expect(page.get_by_role("row", name="Rated 👍 / 👎")).to_contain_text("0 / 1")
    expect(page.get_by_role("row", name="Conversations", exact=False).first).to_contain_text("1")
    expect(page.locator("[data-comments]")).to_contain_text("Also on Fridays!")
    expect(page.get_by_role("img", name="Conversations per day").locator("rect")).to_have_count(1)

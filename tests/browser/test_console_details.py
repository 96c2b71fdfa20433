"""Console details a newcomer tripped over, seen in a real Chromium: the overview's chart has axes and
its turn counters say what they count, the language model can be tested live, the conversation page
shows the transcript above the reply box with Send and Hand back side by side, a visitor is named
rather than shown as hex, and "Remove" on Operators does not look like the primary action."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.admin_ui.conftest import PASSWORD, console  # noqa: F401  (the console fixture)


def _sign_in(page, url: str, where: str) -> None:
    page.goto(f"{url}{where}")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{url}{where}")


def test_overview_chart_axes_counters_and_a_live_language_model_test(console, page, fake_openai):  # noqa: F811
    _sign_in(page, console.url, "/admin")
    expect(page.locator("[data-axis=x]")).to_have_text("60 min ago30 min agonow")
    expect(page.locator("[data-axis=y]")).to_contain_text("turns / min")
    expect(page.get_by_role("row", name="Turns answered by this process")).to_be_visible()
    expect(page.get_by_role("row", name="Turns in the last hour (every process)")).to_be_visible()
    expect(page.get_by_role("row", name="Turns since start")).to_have_count(0)

    page.get_by_role("button", name="Test the language model connection").click()
    expect(page.locator("[data-llm-test]")).to_contain_text("answered in")
    assert fake_openai.chat_requests()[-1]["body"]["messages"][-1]["content"] == "Reply with the word OK."
    fake_openai.fail_next(401)
    page.get_by_role("button", name="Test the language model connection").click()
    expect(page.locator("[data-llm-test]")).to_contain_text("failed: language model request failed")


def test_conversation_page_transcript_above_the_reply_with_aligned_buttons(console, browser, page):  # noqa: F811
    visitor = browser.new_context()
    try:
        chat = visitor.new_page()
        chat.goto(f"{console.url}/chat")
        chat.get_by_label("Your message").fill("hello")
        chat.get_by_role("button", name="Send").click()
        expect(chat.locator("[data-role=agent]").last).to_have_text("echo: hello")
    finally:
        visitor.close()
    _sign_in(page, console.url, "/admin/conversations")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name="echo: hello"))
    expect(row).to_contain_text("Web visitor")
    row.get_by_role("link", name="echo: hello").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Conversation with Web visitor")
    page.get_by_role("button", name="Take over").click()
    transcript = page.locator("#transcript").bounding_box()
    reply = page.get_by_role("textbox", name="Reply").bounding_box()
    assert transcript["y"] + transcript["height"] <= reply["y"], (transcript, reply)
    send = page.get_by_role("button", name="Send").bounding_box()
    hand_back = page.get_by_role("button", name="Hand back").bounding_box()
    assert abs(send["y"] - hand_back["y"]) < 2 and abs(send["height"] - hand_back["height"]) < 2, (send, hand_back)
    page.get_by_role("button", name="Hand back").click()
    expect(page.get_by_role("button", name="Take over")).to_be_visible()


def test_remove_on_operators_is_not_styled_as_the_primary_action(console, page):  # noqa: F811
    _sign_in(page, console.url, "/admin/operators")
    primary = page.get_by_role("button", name="Add operator")
    remove = page.get_by_role("button", name="Remove").first

    def background(locator) -> str:
        return locator.evaluate("node => getComputedStyle(node).backgroundColor")

    assert background(remove) != background(primary)


def test_the_knowledge_page_is_split_into_tabs(console, page):  # noqa: F811
    _sign_in(page, console.url, "/admin/knowledge")
    tabs = page.get_by_role("navigation", name="Knowledge sections")
    expect(tabs.get_by_role("link")).to_have_text(["Documents", "Add text or a website", "Retrieval test",
                                                    "Topics", "Ingestion jobs"])
    expect(page.get_by_role("heading", name="Documents in “main”")).to_be_visible()
    expect(page.get_by_role("heading", name="Retrieval test")).to_have_count(0)
    tabs.get_by_role("link", name="Retrieval test").click()
    expect(page.get_by_role("heading", name="Retrieval test")).to_be_visible()
    expect(page.get_by_role("heading", name="Recent live retrievals")).to_be_visible()
    expect(page.get_by_role("heading", name="Documents in “main”")).to_have_count(0)
    tabs.get_by_role("link", name="Add text or a website").click()
    expect(page.get_by_role("heading", name="Import website")).to_be_visible()
    expect(page.get_by_role("heading", name="Upload files")).to_have_count(0)
    assert page.evaluate("document.documentElement.scrollHeight") < 1600

"""Prompt and Live data in a real Chromium: edit the system template and restore the old one; change
business hours and see the agent's calendar change."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.admin_ui.conftest import PASSWORD, console  # noqa: F401  (the console fixture)


def _sign_in(page, url: str) -> None:
    page.goto(url)
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(url)


def test_edit_and_restore_a_template(console, page):  # noqa: F811
    _sign_in(page, f"{console.url}/admin/prompt")
    editor = page.get_by_label("Template")
    original = editor.input_value()
    editor.fill("You are the assistant of {{ business_name }}.\nBe brief.\n")
    expect(page.locator("[data-gutter] span")).to_have_count(3)  # line numbers follow the text
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text("Done: saved")
    assert page.get_by_label("Template").input_value() == "You are the assistant of {{ business_name }}.\nBe brief.\n"

    page.get_by_label("Template").fill("{% if %}broken\n")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert")).to_contain_text("line 1")
    page.goto(f"{console.url}/admin/prompt")
    page.get_by_role("link", name="Diff of version 1").click()
    expect(page.get_by_label("Diff", exact=True)).to_contain_text("+You are the assistant of {{ business_name }}.")
    page.get_by_role("button", name="Restore version 1").click()
    expect(page.get_by_role("status")).to_have_text("Done: restored")
    assert page.get_by_label("Template").input_value() == original

    page.get_by_label("Message").fill("Do you rent tandems?")
    page.get_by_role("button", name="Preview").click()
    expect(page.get_by_role("table", name="Sections")).to_contain_text("calendar")


def test_change_business_hours_and_see_the_calendar_change(console, page):  # noqa: F811
    _sign_in(page, f"{console.url}/admin/live")
    calendar = page.get_by_label("Calendar", exact=True)
    assert "open 10:00-18:00" not in calendar.inner_text()
    page.get_by_role("textbox", name="Time zone").fill("Europe/Amsterdam")
    for day in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"):
        page.get_by_role("textbox", name=day, exact=True).fill("10:00-18:00")
    page.get_by_role("textbox", name="Sunday", exact=True).fill("closed")
    page.get_by_role("button", name="Save hours").click()
    expect(page.get_by_role("status")).to_have_text("Done: saved hours")
    text = page.get_by_label("Calendar", exact=True).inner_text()
    assert text.count("open 10:00-18:00") >= 36 and "Sunday" in text and ": closed" in text
    page.get_by_role("textbox", name="Monday", exact=True).fill("nine to five")
    page.get_by_role("button", name="Save hours").click()
    expect(page.get_by_role("alert")).to_contain_text("not an opening span")
    assert page.get_by_role("textbox", name="Monday", exact=True).input_value() == "nine to five"


def test_the_hours_placeholder_fits_its_field(console, page):  # noqa: F811
    _sign_in(page, f"{console.url}/admin/live")
    page.goto(f"{console.url}/admin/live")
    field = page.get_by_label("Monday")
    room = field.evaluate("""el => {
        const style = getComputedStyle(el);
        const ctx = document.createElement('canvas').getContext('2d');
        ctx.font = `${style.fontSize} ${style.fontFamily}`;
        const inner = el.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
        return inner - ctx.measureText(el.placeholder).width;
    }""")
    assert room >= 0, f"the placeholder is cut off by {-room:.0f} px"
    expect(page.get_by_text("Each day: a span like 09:00-17:00, or closed.")).to_be_visible()

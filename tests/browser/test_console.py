"""The console in a real Chromium: sign in by the field and button names, see the overview; a wrong
password says so; sign out."""

from __future__ import annotations

from tests.admin_ui.conftest import PASSWORD, console  # noqa: F401  (the console fixture)


def test_sign_in_see_the_overview_and_sign_out(page, console):  # noqa: F811
    page.goto(f"{console.url}/admin")
    assert page.url.endswith("/admin/login?next=/admin")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill("not it")
    page.get_by_role("button", name="Sign in").click()
    assert page.get_by_role("alert").inner_text() == "Invalid username or password"
    assert page.get_by_label("Username").input_value() == "root"

    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{console.url}/admin")
    assert page.get_by_role("heading", name="Overview").is_visible()
    assert page.get_by_role("link", name="Overview").get_attribute("aria-current") == "page"
    status = page.get_by_role("row", name="Redis").inner_text()
    assert "up" in status
    assert page.get_by_text(f"{console.services.settings.public_url}/channels/telegram/webhook").is_visible()

    page.set_viewport_size({"width": 390, "height": 844})  # a phone: the page still fits its width
    wide = page.evaluate("""[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right
        > window.innerWidth + 1).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))""")
    assert wide == [], wide

    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{console.url}/admin/login")
    page.goto(f"{console.url}/admin")
    assert "/admin/login" in page.url

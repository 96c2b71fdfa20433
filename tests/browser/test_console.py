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
    wide = page.evaluate("""[...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
        .map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))""")
    assert wide == [], wide

    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{console.url}/admin/login")
    page.goto(f"{console.url}/admin")
    assert "/admin/login" in page.url


def test_upload_a_pdf_see_it_ready_and_run_a_retrieval_test(page, console, tmp_path):  # noqa: F811
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.multi_cell(0, 8, "Winter storage: we keep your bike dry and serviced from November to March for 60 euros.")
    path = tmp_path / "storage.pdf"
    pdf.output(str(path))

    page.goto(f"{console.url}/admin/knowledge")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{console.url}/admin/knowledge")
    photo = tmp_path / "photo.png"
    photo.write_bytes(b"\x89PNG\r\n\x1a\n")
    page.get_by_label("Files for “main”").set_input_files([str(path), str(photo)])
    page.get_by_role("button", name="Upload files").click()
    progress = page.get_by_role("table", name="Upload progress")
    page.wait_for_selector("[data-upload-progress][data-done]")  # each file went up on its own request
    rows = progress.get_by_role("row")
    assert "storage.pdf" in rows.nth(0).inner_text() and "ready" in rows.nth(0).inner_text()
    assert "photo.png" in rows.nth(1).inner_text() and "refused" in rows.nth(1).inner_text()
    assert "unsupported file type" in rows.nth(1).inner_text()
    documents = page.locator("section", has=page.get_by_role("heading", name="Documents in “main”"))
    assert documents.get_by_role("cell", name="storage.pdf", exact=True).is_visible()  # without a reload
    assert documents.get_by_role("cell", name="ready", exact=True).is_visible()
    assert page.get_by_text("No documents yet.").count() == 0

    page.get_by_role("link", name="Retrieval test").click()
    page.get_by_label("Query", exact=True).fill("how much is winter storage")
    page.get_by_label("Strategy").select_option("bm25")
    page.get_by_role("button", name="Search").click()
    first = page.get_by_role("table", name="Results", exact=True).get_by_role("row").nth(1)
    assert "storage" in first.inner_text()  # the PDF's chunk

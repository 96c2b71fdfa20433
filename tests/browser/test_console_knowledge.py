"""Knowledge in a real Chromium, with the RQ worker running jobs: "New topic" and find it in the
table; paste text and watch its job finish on the jobs page without a reload."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.admin_ui.conftest import PASSWORD, worker_console  # noqa: F401  (the fixture)


def test_new_topic_and_pasted_text(worker_console, page):  # noqa: F811
    page.goto(f"{worker_console.url}/admin/knowledge/topics")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{worker_console.url}/admin/knowledge/topics")
    page.get_by_role("link", name="New topic").click()
    page.get_by_role("textbox", name="Source").fill("tandems")
    page.get_by_role("textbox", name="Title").fill("Tandem rental")
    page.get_by_role("textbox", name="Summary").fill("Tandems cost 50 euros per day.")
    page.get_by_role("button", name="Create topic").click()
    expect(page.get_by_role("status")).to_have_text("Done: saved tandems")
    page.get_by_role("searchbox", name="Search").fill("tandem")
    page.get_by_role("button", name="Find").click()
    expect(page.get_by_role("table", name="Topics")).to_contain_text("Tandem rental")

    page.goto(f"{worker_console.url}/admin/knowledge?tab=imports")
    page.get_by_role("textbox", name="Text to turn into topics").fill("# Gift cards\n\nGift cards never expire.\n")
    page.get_by_role("button", name="Add text").click()
    page.wait_for_url(f"{worker_console.url}/admin/knowledge/jobs")
    jobs = page.get_by_role("table", name="Jobs")
    expect(jobs.locator('[data-status="done"]')).to_have_count(1, timeout=20_000)  # updated in place
    expect(jobs).to_contain_text("append_text")

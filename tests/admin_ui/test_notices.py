"""The console's "Done:" notice shows only what the console itself said after an action, never words a
crafted link puts in ``?done=`` (issue 26 item 10)."""

from __future__ import annotations

import httpx

from tests.admin_ui.conftest import csrf_of, sign_in

SPOOF = "Your session expired. Call +1-555-0100"


def test_a_crafted_done_text_does_not_show_and_a_real_notice_does(console, admin):
    page = admin.get("/admin/operators")
    added = admin.post("/admin/operators", data={"csrf_token": csrf_of(page.text), "username": "ann",
                                                  "password": "ann's long password", "role": "operator"})
    assert added.status_code == 303
    shown = admin.get(added.headers["location"])
    assert "Done: added ann</p>" in shown.text
    for path in ("/admin/operators", "/admin/knowledge", "/admin/prompt", "/admin/live", "/admin/knowledge/topics",
                 "/admin/inbox"):
        spoofed = admin.get(path, params={"done": SPOOF, "error": SPOOF})
        assert spoofed.status_code == 200 and "Your session expired" not in spoofed.text, path
        forged = admin.get(path, params={"done": f"{'0' * 32}~{SPOOF}"})
        assert "Your session expired" not in forged.text, path
    with httpx.Client(base_url=console.url, timeout=20) as other:  # another session cannot replay the link
        sign_in(other)
        assert "Done: added ann" not in other.get(added.headers["location"]).text

"""The Conversations screen's text filter finds a word from any message of a conversation."""

from __future__ import annotations

import re

import httpx

from tests.admin_ui.conftest import admin  # noqa: F401  (the fixture)


def test_the_text_filter_finds_a_word_from_an_earlier_message(admin, console):  # noqa: F811
    with httpx.Client(base_url=console.url, timeout=30) as visitor:
        session = visitor.post("/api/chat/sessions").json()
        auth = {"Authorization": f"Bearer {session['token']}"}
        for text in ("Can I book the kiln for a bisque firing?", "Great, see you then"):
            visitor.post(f"/api/chat/sessions/{session['session_id']}/messages", json={"text": text}, headers=auth)
    found = admin.get("/admin/conversations", params={"q": "Kiln"}).text
    assert len(set(re.findall(r'/admin/conversations/([0-9a-f]{32})"', found))) == 1
    assert "echo: Great, see you then" in found  # the row shows the last message, which has no "kiln"
    missing = admin.get("/admin/conversations", params={"q": "glaze"}).text
    assert not re.findall(r'/admin/conversations/([0-9a-f]{32})"', missing)

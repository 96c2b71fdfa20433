"""The overview's last hour is read from what turns stored (shared by every process), not from one
process's counters: turns per minute, p50/p99, fallback answers."""

from __future__ import annotations

import re

import httpx

from tests.admin_ui.conftest import sign_in


def test_the_last_hour_counts_turns_and_fallbacks(console, fake_openai):
    with httpx.Client(base_url=console.url, timeout=30) as client:
        sign_in(client)
        empty = client.get("/admin").text
        assert re.search(r"<th scope=\"row\">Turns in the last hour \(every process\)</th><td>0</td>", empty)
        session = client.post("/api/chat/sessions").json()
        auth = {"Authorization": f"Bearer {session['token']}"}
        path = f"/api/chat/sessions/{session['session_id']}/messages"
        for text in ("one", "two"):
            assert client.post(path, json={"text": text}, headers=auth).json()["reply"]["text"] == f"echo: {text}"
        fake_openai.fail_next(500)
        assert client.post(path, json={"text": "three"}, headers=auth).json()["reply"]["text"] == \
            console.services.settings.llm_fallback_message
        page = client.get("/admin").text
    assert re.search(r"<th scope=\"row\">Turns in the last hour \(every process\)</th><td>3</td>", page)
    assert re.search(r"LLM errors \(fallback answers\)</th><td>1</td>", page)
    p50, p99 = map(float, re.search(r"p50 / p99</th><td>(\d+) ms / (\d+) ms", page).groups())
    assert 0 <= p50 <= p99 < 5000
    assert 'aria-label="Turns per minute over the last hour: 3 in all, at most 3 in a minute"' in page

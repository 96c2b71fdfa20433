"""The Live data screen over HTTP: typed forms validated by the attributes' own rules (errors next to
the field, what was typed kept), the calendar following a change of business hours and closed
dates, custom sections of a persona, and operators refused on every change."""

from __future__ import annotations

import re
from datetime import date, timedelta

import httpx

from tests.admin_ui.conftest import csrf_of, operator_client


def calendar(html: str) -> str:
    return re.search(r'<pre class="calendar" aria-label="Calendar">(.*?)</pre>', html, re.S).group(1)


def save(client: httpx.Client, form: str, **fields) -> httpx.Response:
    csrf = csrf_of(client.get("/admin/live").text)
    return client.post("/admin/live/save", data={"csrf_token": csrf, "form": form, **fields})


def test_business_hours_and_closed_dates_change_the_calendar(admin):
    before = calendar(admin.get("/admin/live").text)
    hours = {d: "09:00-17:00" for d in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")}
    assert save(admin, "hours", timezone="UTC", **hours).status_code == 303
    after = calendar(admin.get("/admin/live").text)
    assert after != before and after.count("09:00-17:00") >= 40
    soon = date.today() + timedelta(days=3)
    assert save(admin, "closed", closed=f"{soon.isoformat()} Staff party\n").status_code == 303
    closed = calendar(admin.get("/admin/live").text)
    assert "Staff party" in closed


def test_bad_values_are_refused_next_to_the_field_and_kept(admin):
    refused = save(admin, "hours", timezone="Mars/Olympus", mon="9 to 5")
    assert refused.status_code == 422 and "Mars/Olympus" in refused.text
    assert 'value="Mars/Olympus"' in refused.text and 'value="9 to 5"' in refused.text
    dates = save(admin, "closed", closed="2026-12-25 Christmas\nnext tuesday\n")
    assert dates.status_code == 422 and "line 2" in dates.text and "next tuesday" in dates.text
    url = save(admin, "injection", url="ftp://example.com/x", period="1h")
    assert url.status_code == 422 and "ftp://example.com/x" in url.text
    page = admin.get("/admin/live").text
    assert 'value="Mars/Olympus"' not in page  # nothing half-saved
    assert '<textarea id="closed" name="closed" rows="5"></textarea>' in page


def test_persona_sections_and_roles(admin, console):
    session = admin.post("/api/chat/sessions").json()
    persona = session["persona_id"]
    csrf = csrf_of(admin.get("/admin/live").text)
    added = admin.post("/admin/live/sections", data={"csrf_token": csrf, "persona_id": persona, "section": "vip",
                                                    "value": "Gold member since 2020", "action": "set"})
    assert added.status_code == 303
    assert "Gold member since 2020" in admin.get(f"/admin/live?persona={persona}").text
    unknown = admin.post("/admin/live/sections", data={"csrf_token": csrf, "persona_id": "nobody",
                                                      "section": "vip", "value": "x", "action": "set"})
    assert unknown.status_code == 422 and "no persona" in unknown.text

    with operator_client(admin, console.url) as olga:
        seen = olga.get("/admin/live").text
        assert "Save hours" not in seen and "readonly" in seen
        refused = olga.post("/admin/live/save", data={"csrf_token": csrf_of(seen), "form": "business",
                                                     "business": "Hijacked"})
        assert refused.status_code == 403
    assert "Hijacked" not in admin.get("/admin/live").text
    no_csrf = admin.post("/admin/live/save", data={"form": "business", "business": "No token"})
    assert no_csrf.status_code == 403


def test_the_prompt_and_live_data_screens_say_which_agents_they_apply_to(admin, settings):
    prompt = "You answer for the bookings desk only.\n{context_str}\nQuestion: {query_str}"
    made = admin.post("/v1/agents", headers={"Authorization": "Bearer admin-secret"}, json={
        "name": "bookings", "displayName": "Bookings desk", "config": {"systemPrompt": prompt}})
    assert made.status_code == 201, made.text
    for path, opening in (("/admin/live", "These values go into"), ("/admin/prompt", "This template makes")):
        said = re.search(r"<p class=\"muted\" data-applies-to>(.*?)</p>", admin.get(path).text, re.S).group(1)
        said = " ".join(said.split()).replace("&#39;", "'")
        assert said == (f"{opening} every agent's prompt, on every channel, the web chat and the agent API: "
                        f"Bookings desk (bookings), The channels' agent ({settings.agent_id.lower()}). Their own "
                        "system prompt takes the place of the instructions for Bookings desk (bookings).")

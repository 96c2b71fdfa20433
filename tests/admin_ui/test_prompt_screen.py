"""The Prompt screen over HTTP: a broken template is refused with its line and the old one stays live;
a save after someone else's is refused; "Restore" makes an old version the current one; preview
shows the compiled messages; operators read but cannot save (403), and a POST without CSRF is refused."""

from __future__ import annotations

import re

from tests.admin_ui.conftest import csrf_of, operator_client


def form_of(html: str) -> dict:
    return {"csrf_token": csrf_of(html), "name": "system",
            "version": re.search(r'name="version" value="([0-9a-f]+)"', html).group(1)}


def test_save_refuses_a_broken_template_with_its_line_and_keeps_the_old_one(admin, console):
    page = admin.get("/admin/prompt").text
    old = re.search(r'<textarea id="source"[^>]*>(.*?)</textarea>', page, re.S).group(1)
    broken = "Hello\n{{ business_name }\nbye\n"
    answer = admin.post("/admin/prompt/save", data={**form_of(page), "source": broken})
    assert answer.status_code == 422 and "line 2" in answer.text
    assert "Hello\n{{ business_name }\nbye" in answer.text  # what was typed is kept
    assert re.search(r'class="bad-line">2<', answer.text)
    again = admin.get("/admin/prompt").text
    assert re.search(r'<textarea id="source"[^>]*>(.*?)</textarea>', again, re.S).group(1) == old


def test_save_restore_and_a_stale_edit(admin, console):
    opened = admin.get("/admin/prompt").text
    first = admin.post("/admin/prompt/save", data={**form_of(opened), "source": "You help {{ business_name }}.\n"})
    assert first.status_code == 303
    stale = admin.post("/admin/prompt/save", data={**form_of(opened), "source": "Mine, typed meanwhile.\n"})
    assert stale.status_code == 409 and "changed by someone else" in stale.text
    assert "Mine, typed meanwhile." in stale.text
    current = admin.get("/admin/prompt").text
    assert "You help {{ business_name }}." in current
    diff = admin.get("/admin/prompt?diff=0").text
    assert '<span class="add">+You help {{ business_name }}.</span>' in diff
    restored = admin.post("/admin/prompt/restore", data={**form_of(current), "index": "0"})
    assert restored.status_code == 303
    back = admin.get("/admin/prompt").text
    assert re.search(r'<textarea id="source"[^>]*>(.*?)</textarea>', back, re.S).group(1) == \
        re.search(r'<textarea id="source"[^>]*>(.*?)</textarea>', opened, re.S).group(1)


def test_preview_shows_the_compiled_messages_and_section_sizes(admin):
    page = admin.get("/admin/prompt").text
    answer = admin.post("/admin/prompt/preview", data={"csrf_token": csrf_of(page), "name": "system",
                                                       "channel": "webchat", "text": "Do you repair tyres?"})
    assert answer.status_code == 200
    assert "<strong>user</strong><pre>Do you repair tyres?</pre>" in answer.text
    assert re.search(r"<td>calendar</td><td>\d+</td>\s*<td>\d+</td>", answer.text)
    bad = admin.post("/admin/prompt/preview", data={"csrf_token": csrf_of(page), "persona_id": "nobody",
                                                    "text": "hi"})
    assert bad.status_code == 422 and "no persona" in bad.text


def test_operators_read_but_cannot_save_and_csrf_is_required(admin, console):
    with operator_client(admin, console.url) as olga:
        seen = olga.get("/admin/prompt").text
        assert "readonly" in seen and ">Save</button>" not in seen
        refused = olga.post("/admin/prompt/save", data={**form_of(seen), "source": "hijacked {{ business_name }}"})
        assert refused.status_code == 403
        refused = olga.post("/admin/prompt/restore", data={**form_of(seen), "index": "0"})
        assert refused.status_code == 403
    no_csrf = admin.post("/admin/prompt/save", data={"name": "system", "source": "x"})
    assert no_csrf.status_code == 403
    assert "hijacked" not in admin.get("/admin/prompt").text

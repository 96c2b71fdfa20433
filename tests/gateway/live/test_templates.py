"""Operator templates: saved versions, refusals with line numbers, the sandbox."""

from __future__ import annotations

import pytest

from gateway.live.template_store import default_source


def _system(admin) -> dict:
    resp = admin.get("/api/templates/system")
    assert resp.status_code == 200
    return resp.json()


def test_default_template_is_served_until_replaced_and_every_save_keeps_the_previous(admin):
    first = _system(admin)
    assert first["is_default"] is True and first["source"] == default_source("system")
    assert "calendar" in first["variables"]
    v1 = "You are {{ agent_name }}.\n<||rag_placeholder||>\n"
    v2 = "You are {{ agent_name }} of {{ business_name }}.\n<||rag_placeholder||>\n"
    assert admin.put("/api/templates/system", json={"source": v1}).json()["previous_versions"] == 1
    saved = admin.put("/api/templates/system", json={"source": v2}).json()
    assert (saved["source"], saved["is_default"], saved["previous_versions"]) == (v2, False, 2)
    history = admin.get("/api/templates/system/versions").json()["versions"]
    assert [v["source"] for v in history] == [v1, default_source("system")]
    assert history[1]["is_default"] is True


def test_a_saved_template_is_what_the_next_prompt_uses(admin):
    admin.put("/api/templates/system", json={"source": "Hi from {{ business_name }}!\n<||rag_placeholder||>"})
    admin.put("/api/attributes/project_attributes_setting_business_name", json={"value": "Acme Hotel"})
    body = admin.post("/api/prompt/preview", json={"text": "hello"}).json()
    assert body["messages"][0] == {"role": "system", "content": "Hi from Acme Hotel!\nNo additional information\n"}
    assert body["messages"][1] == {"role": "user", "content": "hello"}


@pytest.mark.parametrize(
    ("source", "line", "fragment"),
    [
        ("line one\n{% if agent_name %}\nno end", 2, "endif"),
        ("ok\n\n{{ agent_name }\n", 3, "unexpected '}'"),
        ("ok\n{{ agent_name }}\n{{ customer_secret }}\n", 3, "'customer_secret' is undefined"),
        ("one\ntwo\n{{ calendar.missing_attribute }}", 3, "has no attribute 'missing_attribute'"),
        ("{{ agent_name }}\n{{ 1 / 0 }}", 2, "ZeroDivisionError"),
    ],
)
def test_bad_template_is_refused_with_its_line_and_the_old_one_stays_live(admin, source, line, fragment):
    good = "Live version {{ agent_name }}\n<||rag_placeholder||>"
    admin.put("/api/templates/system", json={"source": good})
    resp = admin.put("/api/templates/system", json={"source": source})
    body = resp.json()
    assert (resp.status_code, body["error"]) == (422, "invalid_input"), body
    assert f"line {line}" in body["message"] and fragment in body["message"], body["message"]
    assert _system(admin)["source"] == good
    assert _system(admin)["previous_versions"] == 1
    preview = admin.post("/api/prompt/preview", json={"text": "hi"}).json()
    assert preview["messages"][0]["content"].startswith("Live version Switchboard")


@pytest.mark.parametrize(
    ("source", "attribute"),
    [
        ("{{ ''.__class__ }}", "__class__"),
        ("ok\n{{ ''.__class__.__mro__[1].__subclasses__() }}", "__class__"),
        ("{{ agent_name.__class__.mro() }}", "__class__"),
        ("{{ cycler.__init__.__globals__ }}", "__init__"),
        ("{{ lipsum.__globals__['os'] }}", "__globals__"),
        ("{% set x = namespace() %}{{ x.__class__.__base__ }}", "__class__"),
    ],
)
def test_sandbox_escapes_fail_with_a_clear_error(admin, source, attribute):
    resp = admin.put("/api/templates/system", json={"source": source})
    assert resp.status_code == 422
    message = resp.json()["message"]
    assert "SecurityError" in message and f"access to attribute '{attribute}'" in message and "unsafe" in message
    assert _system(admin)["is_default"] is True


def test_unknown_template_and_auth(admin, live_gateway):
    assert admin.get("/api/templates/nope").status_code == 404
    assert admin.put("/api/templates/nope", json={"source": "x"}).json()["error"] == "not_found"
    import httpx

    anonymous = httpx.put(f"{live_gateway.url}/api/templates/system", json={"source": "x"})
    assert anonymous.status_code == 401
    assert _system(admin)["is_default"] is True


def test_meta_and_summary_prompts_are_templates_too(admin):
    meta = admin.get("/api/templates/conversation_meta").json()
    assert meta["variables"] == ["current_meta", "history"]
    resp = admin.put("/api/templates/data_summary", json={"source": "Summarize {{ history }}"})
    assert resp.status_code == 422 and "'history' is undefined" in resp.json()["message"]

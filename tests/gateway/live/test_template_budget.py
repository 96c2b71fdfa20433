"""Template rendering with a budget: refused at save, stopped at turn time, the gateway stays responsive."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import tracemalloc

import httpx
import pytest
from jinja2 import Template

from gateway.core.settings import Settings
from gateway.live.template_render import MAX_IDLE_THREADS, RenderBudget, _Render
from gateway.live.template_sandbox import OverBudget
from gateway.live.template_store import TEMPLATE_VARIABLES, TemplateInvalid, TemplateOverBudget, default_source
from tests.inspect import read_trace

LOOP_1E8 = "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}"
GOOD = "Live version {{ agent_name }}\n<||rag_placeholder||>"


async def _store_directly(services, source: str) -> None:
    """A version saved before the budget existed: written as the store writes it, without any check."""
    await services.redis.set(services.store.key("template", "system"), _saved(source))


def _saved(source: str) -> str:
    return json.dumps({"source": source, "saved_at": "2026-01-01T00:00:00+00:00"})


def _render_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "template-render" and t.is_alive()]


def test_a_save_that_loops_too_long_is_refused_quickly_and_nothing_is_stored(admin):
    admin.put("/api/templates/system", json={"source": GOOD})
    started = time.monotonic()
    resp = admin.put("/api/templates/system", json={"source": "ok\n" + LOOP_1E8})
    elapsed = time.monotonic() - started
    body = resp.json()
    assert (resp.status_code, body["error"]) == (422, "invalid_input"), body
    assert "budget of 1 s (SWITCHBOARD_TEMPLATE_RENDER_TIMEOUT_S)" in body["message"], body["message"]
    assert "line 2" in body["message"]  # where it was when it was stopped
    assert elapsed < 4, elapsed
    current = admin.get("/api/templates/system").json()
    assert (current["source"], current["previous_versions"]) == (GOOD, 1)
    assert [v["source"] for v in admin.get("/api/templates/system/versions").json()["versions"]] == [
        default_source("system")
    ]


def test_a_huge_repetition_is_refused_without_allocating_it(admin):
    tracemalloc.start()
    try:
        resp = admin.put("/api/templates/system", json={"source": "{{ agent_name }}\n{{ 'a' * 10**9 }}"})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    body = resp.json()
    assert (resp.status_code, body["error"]) == (422, "invalid_input"), body
    assert "line 2" in body["message"] and "'*' would make a value of 1000000000 characters" in body["message"]
    assert "SWITCHBOARD_TEMPLATE_MAX_OUTPUT_CHARS" in body["message"]
    assert peak < 50_000_000, f"{peak} bytes allocated while refusing it"
    assert admin.get("/api/templates/system").json()["is_default"] is True


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("{{ 'ab' * 10**7 }}", "'*' would make a value of 20000000"),
        ("{{ [1] * 10**8 }}", "'*' would make a value of 100000000"),
        ("{{ 10 ** 100000 }}", "'**' would make an integer of more than 4300 digits"),
        ("{{ 'a'.ljust(10**9) }}", "ljust() would make a value of 1000000000"),
        ("{{ 'a'.zfill(10**9) }}", "zfill() would make a value of 1000000000"),
        ("{{ 'x'|center(10**9) }}", "the 'center' filter would make a value of 1000000000"),
        ("{{ ('a\n' * 1000)|indent(10**6) }}", "the 'indent' filter would make a value of"),
        ("{{ 'a b'|wordwrap(10**9) }}", "the 'wordwrap' filter would make a value of 1000000000"),
        ("{{ ('x' * 1000)|replace('x', 'y' * 100000) }}", "the 'replace' filter would make a value of 100000000"),
        ("{{ '%1000000000d' % 1 }}", "'%' formatting asks for a width of 1000000000"),
        ("{{ '{:>1000000000}'.format(1) }}", "str.format asks for a width of 1000000000"),
        ("{{ ','.join(['x' * 100000] * 100) }}", "join() would make a value of 10000099"),
        ("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
         "joining text would make a value of 2097152"),
        ("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s %}{{ ns.s }}{{ ns.s }}"
         "{% endset %}{% endfor %}", "joining text would make a value of 2097152"),
        ("{% set l = ['x'] %}{% for i in range(40) %}{{ l.extend(l) }}{% endfor %}",
         "extend() would make a value of 2097152"),
        ("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
         "the output is longer than the budget of 2000000 characters"),
    ],
)
async def test_amplifiers_are_refused_before_they_grow(services, source, fragment):
    with pytest.raises(TemplateInvalid) as refused:
        await services.live.templates.put("system", source)
    assert "over budget" in refused.value.message and fragment in refused.value.message, refused.value.message
    assert (await services.live.templates.get("system")).is_default is True


async def test_ordinary_formatting_stays_allowed(services):
    source = ("{{ 'Call %s on %d'|format(agent_name, 5551234567) }} {{ '{:>8}'.format('x') }} "
              "{{ agent_name|center(20) }} {{ [agent_name, business_name]|join(', ') }} {{ 'ab' * 3 }} {{ 2 ** 64 }}"
              "{% set ns = namespace(n=0) %}{% for i in range(1000) %}{% set ns.n = ns.n + i %}{% endfor %} {{ ns.n }}"
              "\n<||rag_placeholder||>")
    await services.live.templates.put("system", source)
    text = await services.live.templates.render("system", **TEMPLATE_VARIABLES["system"])
    assert text == ("Call Switchboard on 5551234567        x     Switchboard      Switchboard, Example Ltd ababab "
                    "18446744073709551616 499500\n<||rag_placeholder||>")


async def test_a_stopped_render_stops_using_the_cpu_and_the_next_render_proceeds(services):
    await _store_directly(services, LOOP_1E8)
    budget = RenderBudget(timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(TemplateOverBudget) as stopped:
        await services.live.templates.render("system", budget=budget, **TEMPLATE_VARIABLES["system"])
    assert stopped.value.limit == "time" and "budget of 0.3 s" in stopped.value.message
    assert time.monotonic() - started < 1.5
    threads = _render_threads()
    cpu, wall = time.process_time(), time.monotonic()
    await asyncio.sleep(0.5)
    assert time.process_time() - cpu < 0.2 * (time.monotonic() - wall)  # nothing spins on in the background
    assert len(threads) <= MAX_IDLE_THREADS  # its thread waits for the next render
    await services.live.templates.put("system", GOOD)
    assert await services.live.templates.render("system", budget=budget, **TEMPLATE_VARIABLES["system"]) == (
        "Live version Switchboard\n<||rag_placeholder||>"
    )


async def test_renders_reuse_their_threads_and_a_stop_before_a_thread_took_the_render_still_holds(services):
    await services.live.templates.put("system", GOOD)
    for _ in range(20):
        await services.live.templates.render("system", **TEMPLATE_VARIABLES["system"])
    before = {t.ident for t in _render_threads()}
    for _ in range(20):
        await services.live.templates.render("system", **TEMPLATE_VARIABLES["system"])
    assert 1 <= len(before) <= MAX_IDLE_THREADS and {t.ident for t in _render_threads()} == before
    job = _Render(Template(LOOP_1E8), {}, RenderBudget(timeout_s=0.3))
    job.stop()  # the caller gave up before any thread ran it
    job.run()
    error = job.result.exception(timeout=1)
    assert isinstance(error, OverBudget) and error.limit == "time"


def test_a_stored_over_budget_template_still_answers_and_health_checks_stay_fast(live_gateway):
    services = live_gateway.services
    _store_sync(services, LOOP_1E8)
    session = httpx.post(f"{live_gateway.url}/api/chat/sessions").json()
    auth = {"Authorization": f"Bearer {session['token']}"}
    path = f"{live_gateway.url}/api/chat/sessions/{session['session_id']}/messages"
    answered: dict = {}
    turn = threading.Thread(
        target=lambda: answered.update(httpx.post(path, json={"text": "Hello?"}, headers=auth, timeout=30).json())
    )
    turn.start()
    latencies = []
    with httpx.Client(base_url=live_gateway.url, timeout=10) as client:
        while turn.is_alive():
            started = time.monotonic()
            assert client.get("/healthz").status_code == 200
            latencies.append(time.monotonic() - started)
            time.sleep(0.05)
    turn.join()
    assert len(latencies) >= 5, latencies  # the turn took the whole render budget, health was asked meanwhile
    assert max(latencies) < 0.5, latencies
    assert answered["reply"]["text"] == "echo: Hello?"
    trace = read_trace(services, answered["turn_id"])
    assert trace.sections["system"]["default_template"] is True
    assert trace.sections["system"]["template_over_time_budget"] is True
    assert "system template not used" in trace.error and "SWITCHBOARD_TEMPLATE_RENDER_TIMEOUT_S" in trace.error
    assert trace.prompt[0].content.startswith("You are Switchboard")


def _store_sync(services, source: str) -> None:
    services.redis_sync.set(services.store.key("template", "system"), _saved(source))


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        # Passes its save (the sample instructions are short), loops too long on the real ones.
        ("{% for c in business_instructions %}{% for i in range(100000) %}{% endfor %}{% endfor %}"
         "<||rag_placeholder||>", "template_over_time_budget"),
        ("{% for c in business_instructions %}{{ business_instructions * 50 }}{% endfor %}<||rag_placeholder||>",
         "template_over_output_budget"),
    ],
)
def test_a_template_over_budget_only_on_real_data_falls_back_and_the_preview_says_why(admin, source, reason):
    assert admin.put("/api/templates/system", json={"source": source}).status_code == 200
    admin.put("/api/attributes/project_attributes_setting_business_instructions", json={"value": "Be kind. " * 600})
    body = admin.post("/api/prompt/preview", json={"text": "hi"}).json()
    assert body["sections"]["system"]["default_template"] is True and body["sections"]["system"][reason] is True
    assert "Be kind. Be kind." in body["messages"][0]["content"]  # the packaged default, with the real data
    assert body["messages"][0]["content"].startswith("You are Switchboard")


def test_the_budget_defaults_are_the_settings_defaults():
    assert RenderBudget.from_settings(Settings.model_construct()) == RenderBudget()

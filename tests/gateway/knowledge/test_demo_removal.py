"""Removing the demo from a running gateway (the admin API and the console's button) takes out the demo's
topics and the values it filled in, resets only those still the demo's, and the prompt and calendar follow."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from pydantic import SecretStr

from gateway.http.app import create_app
from gateway.knowledge.demo import demo_sources
from tests.admin_ui.conftest import PASSWORD, csrf_of, sign_in
from tests.fakes.live_server import LiveServer

ADMIN = {"Authorization": "Bearer admin-secret"}
NAME = "project_attributes_setting_business_name"
HOURS = "project_attributes_setting_business_hours"


@pytest.fixture
def demo(settings) -> Iterator[httpx.Client]:
    """`make run`: a gateway with the demo loaded, and an admin API client."""
    configured = settings.model_copy(update={"demo": True, "admin_password": SecretStr(PASSWORD),
                                             "admin_user": "root"})
    with LiveServer(create_app(configured)) as server, \
            httpx.Client(base_url=server.url, headers=ADMIN, timeout=20) as client:
        yield client


def _prompt(client: httpx.Client) -> str:
    return client.post("/api/prompt/preview", json={"text": "When are you open?"}).json()["messages"][0]["content"]


def _calendar(prompt: str) -> str:
    return prompt.split("<ConvoAgentCalendar>")[1].split("</ConvoAgentCalendar>")[0]


def test_the_api_removes_the_demo_but_keeps_a_name_the_operator_changed(demo):
    assert "open 10:00-16:00" in _calendar(_prompt(demo))
    assert demo.put(f"/api/attributes/{NAME}", json={"value": "Clay Corner Studio"}).status_code == 200

    removed = demo.delete("/api/kb/demo").json()
    assert removed["topics"] == len(demo_sources())
    assert removed["attributes"] == [HOURS] and removed["kept"] == [NAME]
    assert removed["summary"].endswith("; kept your own business name")

    prompt = _prompt(demo)
    assert prompt.splitlines()[0].startswith("You are Switchboard, the AI assistant of Clay Corner Studio.")
    assert "open" not in _calendar(prompt)  # the calendar was rebuilt without the demo's hours
    assert demo.get(f"/api/attributes/{HOURS}").json()["value"] == {}
    assert demo.get("/api/kb/topics").json()["topics"] == []


def test_the_consoles_remove_takes_the_demo_business_out_and_points_at_live_data(demo):
    with httpx.Client(base_url=str(demo.base_url), timeout=20) as console:
        sign_in(console)
        page = console.get("/admin/knowledge").text
        assert "The demo is still in this knowledge base" in page
        done = console.post("/admin/knowledge/demo/remove", data={"csrf_token": csrf_of(page)},
                            follow_redirects=True).text
        assert (f"Removed {len(demo_sources())} demo topic(s) and the demo&#39;s business name and business hours. "
                "Set your business name and hours on Live data") in done
        assert "The demo is still in this knowledge base" not in done
        live = console.get("/admin/live").text
        assert "No business name yet" in live and "Harbor Bikes" not in live
    prompt = _prompt(demo)
    assert prompt.splitlines()[0].startswith("You are Switchboard, an AI assistant.")
    assert "Harbor Bikes" not in prompt and "open" not in _calendar(prompt)

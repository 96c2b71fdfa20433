"""Defaults a newcomer sees in the prompt: no invented business name; the demo fills in its own."""

from __future__ import annotations

import httpx

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer

ADMIN = {"Authorization": "Bearer admin-secret"}


def _system_prompt(settings) -> str:
    with LiveServer(create_app(settings)) as server:
        preview = httpx.post(f"{server.url}/api/prompt/preview", headers=ADMIN, timeout=20,
                             json={"text": "When are you open on Saturday?"}).json()
    return preview["messages"][0]["content"]


def test_without_a_business_name_the_prompt_invents_none(settings):
    first_line = _system_prompt(settings).splitlines()[0]
    assert "our business" not in first_line
    assert first_line.startswith("You are Switchboard, an AI assistant. You talk")


def test_the_demo_fills_in_its_business_name_and_opening_hours(settings):
    prompt = _system_prompt(settings.model_copy(update={"demo": True}))
    assert prompt.splitlines()[0].startswith("You are Switchboard, the AI assistant of Harbor Bikes.")
    calendar = prompt.split("<ConvoAgentCalendar>")[1].split("</ConvoAgentCalendar>")[0]
    assert "10:00-16:00" in calendar and "09:00-18:00" in calendar

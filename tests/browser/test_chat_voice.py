"""The widget's microphone in a real Chromium (issue 44): Chromium's fake microphone is recorded with
MediaRecorder, posted to the session's voice route, transcribed by the fake speech server and answered
from the knowledge base; the transcript shows as the visitor's message."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from gateway.http.app import create_app
from tests.browser.conftest import chromium
from tests.fakes.live_server import LiveServer

ADMIN = {"Authorization": "Bearer admin-secret"}
HOURS = [{"source": "hours", "title": "Opening hours", "facts": ["Mon-Fri 9:00-18:00"],
          "summary": "The shop is open Monday to Friday from 9:00 to 18:00."}]


@pytest.fixture(scope="module")
def mic_browser():
    with chromium("--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream") as browser:  # a beeping mic
        yield browser


@pytest.fixture
def voice_gateway(settings) -> Iterator[LiveServer]:
    with LiveServer(create_app(settings.model_copy(update={"retrieval_strategy": "hybrid"}))) as server:
        yield server


def test_a_widget_recording_is_transcribed_and_answered(mic_browser, voice_gateway, fake_openai):
    import httpx

    assert httpx.post(f"{voice_gateway.url}/api/kb/topics", json=HOURS, headers=ADMIN).status_code == 201
    fake_openai.script_reply("We are open Monday to Friday, 9:00 to 18:00.")
    context = mic_browser.new_context(permissions=["microphone"])
    page = context.new_page()
    try:
        page.goto(f"{voice_gateway.url}/chat")
        page.wait_for_selector("[data-role=agent]")  # the greeting
        mic = page.get_by_role("button", name="Record a voice message")
        mic.click()
        stop = page.get_by_role("button", name="Stop recording and send")
        expect(stop).to_have_attribute("aria-pressed", "true")
        page.wait_for_timeout(700)
        stop.click()
        expect(page.locator("[data-role=user]").last).to_have_text("What are your opening hours?")
        expect(page.locator("[data-role=agent]").last).to_have_text("We are open Monday to Friday, 9:00 to 18:00.")
    finally:
        context.close()
    [heard] = fake_openai.audio_requests()
    assert heard["body"]["bytes"] > 1000 and heard["body"]["content_type"] in ("video/webm", "audio/webm")
    [chat] = fake_openai.chat_requests()
    said = [m["content"] for m in chat["body"]["messages"]]
    assert said[-1] == "What are your opening hours?"
    assert any("Monday to Friday from 9:00 to 18:00" in m for m in said[:-1])

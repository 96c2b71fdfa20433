"""The web chat page shows a reply's sources under it, and again after a reload (from the transcript)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer

ADMIN = {"Authorization": "Bearer admin-secret"}
TOPICS = [{"source": "rent", "title": "E-bike rental prices", "facts": ["35 euros per day"],
           "summary": "E-bikes cost 35 euros per day, helmet included."}]


@pytest.fixture
def citing_gateway(settings) -> Iterator[LiveServer]:
    cited = settings.model_copy(update={"citations_format": "inline", "retrieval_strategy": "hybrid"})
    with LiveServer(create_app(cited)) as server:
        assert httpx.post(f"{server.url}/api/kb/topics", json=TOPICS, headers=ADMIN).status_code == 201
        yield server


def _sources(page) -> list[str]:
    box = page.locator("[data-role=agent] + [data-sources]").last
    box.wait_for()
    box.locator("summary").click()  # an expandable list, closed until asked for
    box.locator("li").first.wait_for(state="visible")
    return box.locator("li").all_inner_texts()


def test_sources_show_under_the_reply_and_after_a_reload(page, citing_gateway, fake_openai):
    fake_openai.script_reply("E-bikes cost 35 euros a day [1]. Helmets are free [3].")
    page.goto(f"{citing_gateway.url}/chat")
    page.wait_for_selector("[data-role=agent]")  # the greeting, which has no sources
    assert page.locator("[data-sources]").count() == 0
    page.get_by_label("Your message").fill("How much does an e-bike rental cost per day?")
    page.get_by_role("button", name="Send").click()
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-role=agent]')].pop().textContent"
        " === 'E-bikes cost 35 euros a day [1]. Helmets are free.'")  # the invalid [3] is gone from the reply
    assert _sources(page) == ["[1] E-bike rental prices"]
    assert page.locator("[data-sources] summary").last.inner_text() == "Sources (1)"

    page.reload()
    page.wait_for_function("() => document.querySelectorAll('[data-role=user]').length === 1")
    assert page.locator("[data-sources]").count() == 1
    assert _sources(page) == ["[1] E-bike rental prices"]
    assert page.locator("[data-role=agent]").last.inner_text() == "E-bikes cost 35 euros a day [1]. Helmets are free."

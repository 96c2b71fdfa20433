"""In Chromium, an admin on the Insights screen: sets a model's price (then the next turn costs it), downloads
the conversations with the export button, and reads a webhook's delivery log (a receiver that is down)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from cryptography.fernet import Fernet
from playwright.sync_api import expect
from pydantic import SecretStr

from gateway.http.app import create_app
from tests.admin_ui.conftest import PASSWORD
from tests.channels.conftest import wait_until
from tests.fakes.live_server import LiveServer, free_port

ADMIN = {"Authorization": "Bearer admin-secret"}


@pytest.fixture
def console(settings) -> Iterator[LiveServer]:
    configured = settings.model_copy(update={
        "admin_password": SecretStr(PASSWORD), "admin_user": "root", "llm_model": "model-x",
        "secret_key": SecretStr(Fernet.generate_key().decode()), "outbound_allow_hosts": "127.0.0.1",
        "webhook_backoff_first_s": 0.2, "webhook_backoff_max_s": 0.5})
    with LiveServer(create_app(configured)) as server:
        yield server


def test_prices_export_and_webhook_log_on_the_insights_screen(page, console, fake_openai, tmp_path):
    api = httpx.Client(base_url=console.url, timeout=20)
    page.goto(f"{console.url}/admin/insights?range=today")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{console.url}/admin/insights?range=today")

    form = page.get_by_role("form", name="Set a model's price")
    form.get_by_label("Model").fill("model-x")
    form.get_by_label("Input").fill("1000")
    form.get_by_label("Output").fill("2000")
    form.get_by_role("button", name="Set price").click()
    expect(page.locator("[data-prices]").get_by_role("row", name="model-x")).to_contain_text("edited")

    hook = api.post("/api/webhooks", headers=ADMIN, json={
        "url": f"http://127.0.0.1:{free_port()}/down", "events": ["conversation.unanswered"]}).json()
    session = api.post("/api/chat/sessions").json()
    fake_openai.script_reply("I don't know, sorry.")
    said = api.post(f"/api/chat/sessions/{session['session_id']}/messages", json={"text": "Do you sell kites?"},
                    headers={"Authorization": f"Bearer {session['token']}"})
    assert said.status_code == 200
    wait_until(lambda: api.get(f"/api/webhooks/{hook['id']}/deliveries", headers=ADMIN).json()["attempts"],
               20, "a delivery attempt")

    page.goto(f"{console.url}/admin/insights?range=today")
    prompt, completion = 11, len("I don't know, sorry.") // 4  # what the fake model server reports
    cost = (prompt * 1000 + completion * 2000) / 1e6
    expect(page.locator("[data-figures]").get_by_role("row", name="Cost")).to_contain_text(f"{cost:.4f}")
    expect(page.locator("[data-cost=channel]").get_by_role("row", name="webchat")).to_contain_text(f"{cost:.4f}")
    log = page.locator(f"[data-webhook='{hook['id']}']")
    expect(log.locator("[data-waiting]")).to_have_text("1")
    expect(log.locator("[data-deliveries] tbody tr").first).to_contain_text("conversation.unanswered")
    expect(log.locator("[data-deliveries] tbody tr").first).to_contain_text("failed")

    with page.expect_download() as download:
        page.locator("[data-export=csv]").click()
    saved = tmp_path / "export.csv"
    download.value.save_as(saved)
    text = saved.read_text()
    assert text.startswith("conversation_id,") and "Do you sell kites?" in text and "I don't know, sorry." in text

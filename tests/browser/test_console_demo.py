"""The console offers to remove the demo once it is loaded, and removing it keeps the operator's topics."""

from __future__ import annotations

import httpx
from playwright.sync_api import expect
from pydantic import SecretStr

from gateway.http.app import create_app
from gateway.knowledge.demo import demo_sources
from tests.admin_ui.conftest import PASSWORD
from tests.fakes.live_server import LiveServer


def test_remove_the_demo_from_the_knowledge_page(settings, page):
    configured = settings.model_copy(update={"admin_password": SecretStr(PASSWORD), "admin_user": "root",
                                             "demo": True})
    with LiveServer(create_app(configured)) as server:
        admin = httpx.Client(base_url=server.url, headers={"Authorization": "Bearer admin-secret"}, timeout=20)
        created = admin.post("/api/kb/topics", json={"source": "pottery-classes", "title": "Pottery classes",
                                                     "summary": "Wheel-throwing classes run on Tuesdays."})
        assert created.status_code in (200, 201), created.text
        page.goto(f"{server.url}/admin/knowledge")
        page.get_by_label("Username").fill("root")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        demo = page.get_by_role("region", name="The demo is still in this knowledge base")
        expect(demo).to_contain_text(f"{len(demo_sources())} topics of the Harbor Bikes demo")
        demo.get_by_role("button", name="Remove the demo").click()
        removed = f"Removed {len(demo_sources())} demo topic(s) and the demo's business name and business hours"
        expect(page.get_by_role("status")).to_contain_text(removed)
        expect(page.get_by_role("region", name="The demo is still in this knowledge base")).to_have_count(0)
        sources = [t["source"] for t in admin.get("/api/kb/topics").json()["topics"]]
        assert sources == ["pottery-classes"]

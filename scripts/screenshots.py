"""Screenshots of the console's main screens for the README and the docs site (docs/screenshots/*.png).

Starts the gateway with the demo knowledge base on a private Redis namespace, has a short web-chat
conversation with it (the offline answerer, no LLM needed), takes it over from the console, and
photographs each screen in a real Chromium at 1280 px (and the conversation at phone width).

    .venv/bin/python scripts/screenshots.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.live_server import free_port  # noqa: E402

OUT = ROOT / "docs" / "screenshots"
PASSWORD = "screenshot password"
MODEL = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2"


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "SWITCHBOARD_AGENT_ID": "shots" + uuid.uuid4().hex[:6],
           "SWITCHBOARD_REDIS_URL": os.environ.get("SHOTS_REDIS_URL", "redis://127.0.0.1:6379/0"),
           "SWITCHBOARD_DATA_DIR": tempfile.mkdtemp(prefix="sb-shots-"), "SWITCHBOARD_DEMO": "true",
           "SWITCHBOARD_ADMIN_PASSWORD": PASSWORD, "SWITCHBOARD_PUBLIC_URL": "https://bot.example.com",
           "SWITCHBOARD_LOG_LEVEL": "WARNING"}
    if MODEL.exists():
        env.setdefault("SWITCHBOARD_EMBEDDING_MODEL_PATH", str(MODEL))
    gateway = subprocess.Popen([sys.executable, "-m", "uvicorn", "gateway.http.app:create_app", "--factory",
                                "--port", str(port), "--log-level", "warning"], cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the gateway did not start")
            time.sleep(0.3)
        shoot(base)
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
        import redis  # the screenshots' private namespace goes away with them

        client = redis.Redis.from_url(env["SWITCHBOARD_REDIS_URL"])
        keys = list(client.scan_iter(match=f"sb:{env['SWITCHBOARD_AGENT_ID']}:*", count=1000))
        for i in range(0, len(keys), 1000):
            client.delete(*keys[i:i + 1000])
    return 0


def shoot(base: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
        chat = browser.new_page(viewport={"width": 420, "height": 760})
        chat.goto(base + "/chat")
        chat.wait_for_selector("[data-role=agent]")
        for text in ("How much is an e-bike for a day?", "Can I talk to a human?"):
            before = chat.locator("[data-role=agent]").count()
            chat.get_by_label("Your message").fill(text)
            chat.get_by_role("button", name="Send").click()
            chat.wait_for_function("n => document.querySelectorAll('[data-role=agent]').length > n", arg=before)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(base + "/admin")
        page.get_by_label("Username").fill("admin")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(base + "/admin")
        page.screenshot(path=str(OUT / "overview.png"), full_page=True)
        page.goto(base + "/admin/conversations")
        page.wait_for_selector("[data-live=on]")
        page.screenshot(path=str(OUT / "conversations.png"), full_page=True)
        page.locator("[data-live-rows] a").first.click()
        page.get_by_role("button", name="Take over").click()
        page.get_by_label("Reply").fill("Hi, this is Sam from Harbor Bikes. How can I help?")
        page.get_by_role("button", name="Send").click()
        page.wait_for_selector("text=Hi, this is Sam")
        page.get_by_text("Turn trace").first.click()
        page.screenshot(path=str(OUT / "conversation.png"), full_page=True)
        page.set_viewport_size({"width": 390, "height": 844})
        page.screenshot(path=str(OUT / "conversation-phone.png"))
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(base + "/admin/knowledge")
        page.get_by_label("Query").fill("e-bike price")
        page.get_by_role("button", name="Search").click()
        page.screenshot(path=str(OUT / "knowledge.png"), full_page=True)
        for name, path in (("prompt", "/admin/prompt"), ("live-data", "/admin/live"),
                           ("topics", "/admin/knowledge/topics")):
            page.goto(base + path)
            page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)
        chat.screenshot(path=str(OUT / "webchat-handoff.png"))
        browser.close()
    print(f"screenshots in {OUT}")


if __name__ == "__main__":
    sys.exit(main())

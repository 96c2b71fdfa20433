"""The site's icon and the widget's launcher, as Chromium draws them: the chat page and the console
name an icon that loads, /favicon.ico answers, and the launcher is a drawn bubble, not an emoji that
shows as an empty box where no emoji font is installed."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from fastapi.responses import HTMLResponse

from tests.fakes.live_server import LiveServer

DRAWN = """async href => {
  const img = new Image();
  const loaded = new Promise((ok, fail) => { img.onload = ok; img.onerror = () => fail(new Error('not an image')); });
  img.src = href;
  await loaded;
  return [img.naturalWidth, img.naturalHeight];
}"""


def test_the_chat_page_and_the_console_have_an_icon_that_loads(page, gateway):
    for path in ("/chat", "/admin"):
        page.goto(gateway.url + path)
        href = page.locator("link[rel=icon]").get_attribute("href")
        assert href == "/favicon.svg", path
        width, height = page.evaluate(DRAWN, f"{gateway.url}{href}")
        assert width > 0 and height > 0
        assert page.evaluate(DRAWN, f"{gateway.url}/favicon.ico") == [32, 32]  # what a browser asks for by itself
    icon = httpx.get(f"{gateway.url}/favicon.ico")
    assert icon.headers["content-type"] == "image/x-icon" and icon.content[:4] == b"\x00\x00\x01\x00"


def test_the_widget_launcher_is_a_drawn_bubble(page, gateway):
    site = FastAPI()

    @site.get("/")
    async def home() -> HTMLResponse:
        return HTMLResponse("<!doctype html><html><head><title>Bakery</title></head><body><h1>Our bakery</h1>"
                            f'<script src="{gateway.url}/widget.js" async></script></body></html>')

    with LiveServer(site) as other:
        page.goto(other.url)
        launcher = page.get_by_role("button", name="Open chat")
        launcher.wait_for()
        assert launcher.inner_text().strip() == ""  # no emoji character to fall back to a box
        icon = launcher.locator("svg")
        box = icon.bounding_box()
        assert box is not None and box["width"] == 28 and box["height"] == 28
        assert icon.evaluate("svg => getComputedStyle(svg.querySelector('path')).fill") == "rgb(255, 255, 255)"
        launcher.click()
        assert launcher.get_attribute("aria-expanded") == "true"

"""Every HTML page the app serves, walked from its route table: each carries a Content-Security-Policy,
nosniff, a referrer policy and a framing rule (none at all but for the chat page, which only the widget's
configured origins may frame)."""

from __future__ import annotations

import re

import httpx
from fastapi.routing import APIRoute
from pydantic import SecretStr
from starlette.routing import Mount, Route

from gateway.http.app import create_app
from tests.admin_ui.conftest import PASSWORD, sign_in
from tests.fakes.live_server import LiveServer


def _get_paths(routes) -> list[str]:
    paths = []
    for route in routes:
        if hasattr(route, "original_router"):  # an included router
            paths += _get_paths(route.original_router.routes)
        elif isinstance(route, Mount):
            paths.append(route.path + "/console.css")  # static files
        elif isinstance(route, (APIRoute, Route)) and "GET" in (route.methods or ()):
            paths.append(re.sub(r"\{[^}]+\}", "x", route.path))
    return paths


def test_every_html_page_carries_the_security_headers(settings):
    configured = settings.model_copy(update={
        "admin_password": SecretStr(PASSWORD), "admin_user": "root",
        "widget_origins": "https://shop.example, https://www.shop.example",
    })
    app = create_app(configured)
    with LiveServer(app, graceful_timeout_s=1) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        sign_in(client)  # plug-ins (channels, console) mounted their routes as the app was made
        pages = {}
        for path in _get_paths(app.routes):
            with client.stream("GET", path) as response:  # headers only: the console's event stream is a route
                pass
            assert response.headers["x-content-type-options"] == "nosniff", path
            assert response.headers.get("referrer-policy"), path
            if response.headers.get("content-type", "").startswith("text/html"):
                pages[path] = response.headers
    for must_see in ("/chat", "/docs", "/redoc", "/admin", "/admin/knowledge", "/admin/conversations/x"):
        assert must_see in pages, sorted(pages)
    for path, headers in pages.items():
        csp = headers.get("content-security-policy", "")
        assert "default-src" in csp and "base-uri 'none'" in csp, (path, csp)
        if path == "/chat":
            assert "frame-ancestors https://shop.example https://www.shop.example" in csp
            assert "x-frame-options" not in headers
            assert "script-src 'self';" in csp  # no inline script on the page that talks to visitors
        else:
            assert "frame-ancestors 'none'" in csp, (path, csp)
            assert headers["x-frame-options"] == "DENY", path
        if not path.startswith(("/docs", "/redoc")):
            assert "'unsafe-inline'" not in csp.split("style-src")[0], (path, csp)  # scripts: never inline

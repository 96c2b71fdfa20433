"""What the internet sees: the widget's CORS limited to its configured origins, the API docs that
can be turned off, and /metrics behind a token when one is set."""

from __future__ import annotations

import httpx
from pydantic import SecretStr

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer

PREFLIGHT = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}


def _serve(settings, **update):
    return LiveServer(create_app(settings.model_copy(update=update)))


def test_the_widget_api_answers_only_configured_origins(settings):
    with _serve(settings, widget_origins="https://shop.example") as server:
        with httpx.Client(base_url=server.url) as client:
            allowed = client.options("/api/chat/sessions", headers={"Origin": "https://shop.example", **PREFLIGHT})
            refused = client.options("/api/chat/sessions", headers={"Origin": "https://evil.example", **PREFLIGHT})
            made = client.post("/api/chat/sessions", json={}, headers={"Origin": "https://evil.example"})
    assert allowed.headers["access-control-allow-origin"] == "https://shop.example"
    assert refused.status_code == 400 and "access-control-allow-origin" not in refused.headers
    # the browser would not hand this answer to the evil page's script
    assert "access-control-allow-origin" not in made.headers


def test_any_origin_by_default(settings):
    with _serve(settings) as server, httpx.Client(base_url=server.url) as client:
        made = client.post("/api/chat/sessions", json={}, headers={"Origin": "https://anyone.example"})
    assert made.json()["session_id"] and made.headers["access-control-allow-origin"] == "*"


def test_the_api_docs_can_be_turned_off(settings):
    with _serve(settings) as server, httpx.Client(base_url=server.url) as client:
        assert "swagger-ui" in client.get("/docs").text
        assert "/api/chat/sessions" in client.get("/openapi.json").json()["paths"]
    with _serve(settings, api_docs=False) as server, httpx.Client(base_url=server.url) as client:
        for path in ("/docs", "/redoc", "/openapi.json"):
            assert client.get(path).status_code == 404, path
        assert client.get("/healthz").json() == {"status": "ok"}


def test_metrics_can_require_a_token(settings):
    with _serve(settings) as server, httpx.Client(base_url=server.url) as client:
        assert "switchboard_" in client.get("/metrics").text  # open by default
    with _serve(settings, metrics_token=SecretStr("scrape-me")) as server, httpx.Client(base_url=server.url) as client:
        bare = client.get("/metrics")
        wrong = client.get("/metrics", headers={"Authorization": "Bearer nope"})
        right = client.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
    assert bare.status_code == wrong.status_code == 401
    assert wrong.json()["error"] and "switchboard_" not in wrong.text
    assert right.status_code == 200 and "switchboard_" in right.text

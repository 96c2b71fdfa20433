"""Every request walks the app's routes in order: the channels' public routes (vendor webhooks, the web
chat's messages, the voice relay's socket) come before the admin API's and the console's routers, so a
customer's message is not matched against ~30 routers first."""

from __future__ import annotations

from starlette.routing import Match

from gateway.http.app import create_app


def _first_full_match(app, scope: dict) -> int:
    for index, route in enumerate(app.router.routes):
        if route.matches(dict(scope))[0] == Match.FULL:
            return index
    raise AssertionError(f"nothing matches {scope['path']}")


def _scope(app, kind: str, method: str, path: str) -> dict:
    return {"type": kind, "method": method, "path": path, "root_path": "", "headers": [], "query_string": b"",
            "app": app}


def test_customer_routes_are_matched_before_the_admin_and_console_routers(channel_settings):
    app = create_app(channel_settings.model_copy(update={"twilio_voice_mode": "relay"}))
    chat = _first_full_match(app, _scope(app, "http", "POST", "/api/chat/sessions/s1/messages"))
    relay = _first_full_match(app, _scope(app, "websocket", "GET", "/channels/twilio/relay"))
    telegram = _first_full_match(app, _scope(app, "http", "POST", "/channels/telegram/webhook"))
    admin = min(_first_full_match(app, _scope(app, "http", "GET", path))
                for path in ("/api/kb/topics", "/api/conversations", "/admin/knowledge/topics"))
    connection_relay = _first_full_match(app, _scope(app, "websocket", "GET", "/channels/twilio/0123456789ab/relay"))
    assert max(chat, relay, telegram, connection_relay) < admin
    # Only plain routes (the vendor webhooks, the API docs pages) go before the web chat's router.
    assert {type(route).__name__ for route in app.router.routes[:min(chat, relay)]} == {"Route"}

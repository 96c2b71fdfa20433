"""Every channel adapter, one line each. Adding a channel = one module + one line here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module

from fastapi import APIRouter, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from starlette.routing import Route

from channels.connections import install_connections
from gateway.channel import PUBLIC, ChannelAdapter, ChannelContext, InboxHandler, Settings, describe_operation


@dataclass(frozen=True)
class ChannelEntry:
    """A channel module (with a ``build(context)`` factory) and when it is configured.

    Vendor SDKs are imported only for configured channels: aiogram alone takes seconds to import.
    """

    module: str
    configured: Callable[[Settings], bool]


CHANNELS: dict[str, ChannelEntry] = {
    "webchat": ChannelEntry("channels.webchat.adapter", lambda s: True),
    "telegram": ChannelEntry("channels.telegram.adapter", lambda s: s.telegram_bot_token is not None),
    "slack": ChannelEntry(
        "channels.slack.adapter", lambda s: s.slack_bot_token is not None and s.slack_signing_secret is not None
    ),
    "twilio_sms": ChannelEntry(
        "channels.twilio.sms", lambda s: bool(s.twilio_account_sid and s.twilio_auth_token)
    ),
    "twilio_voice": ChannelEntry(
        "channels.twilio.voice", lambda s: bool(s.twilio_account_sid and s.twilio_auth_token)
    ),
    "twilio_relay": ChannelEntry(
        "channels.twilio.relay",
        lambda s: s.twilio_voice_mode == "relay" and bool(s.twilio_account_sid and s.twilio_auth_token),
    ),
}


def build_adapters(context: ChannelContext) -> dict[str, ChannelAdapter]:
    adapters = {}
    for name, entry in CHANNELS.items():
        if not entry.configured(context.settings):
            continue
        adapter = import_module(entry.module).build(context)
        if adapter is not None:
            adapters[name] = adapter
    return adapters


def _mount(app: FastAPI, router: APIRouter) -> None:
    """Include an adapter's routes; its vendor webhooks (plain Starlette routes) go first in the app.

    A webhook's ack budget is a few milliseconds: matched first and called without FastAPI's
    per-request machinery (dependencies, body models, response serialisation), it skips most of the
    router's work. The app's exception handlers still translate its errors. The rest of the adapter's
    routes (the web chat's messages, the voice relay's socket) come right after the plain routes: every
    request walks the app's routes in order, and the ~30 admin and console routers before them cost a
    web-chat message about 0.6 ms of CPU to walk."""
    webhooks = [route for route in router.routes if type(route) is Route]
    app.router.routes[:0] = webhooks
    router.routes = [route for route in router.routes if type(route) is not Route]
    app.include_router(router, responses=PUBLIC)
    included = app.router.routes.pop()
    first = next((i for i, route in enumerate(app.router.routes) if type(route) is not Route), len(app.router.routes))
    app.router.routes.insert(first, included)


def _describe_webhooks(app: FastAPI, name: str) -> None:
    """A vendor module's ``WEBHOOKS`` (path → OpenAPI operation) go into the app's document."""
    for path, operation in getattr(import_module(CHANNELS[name].module), "WEBHOOKS", {}).items():
        describe_operation(app, path, "post", operation)


def _register_handlers(context: ChannelContext, adapters: dict[str, ChannelAdapter]) -> None:
    for name, adapter in adapters.items():
        if isinstance(adapter, InboxHandler):
            context.inbox_handlers[name] = adapter
        context.rag_modes[name] = adapter.capabilities.rag_mode
        context.capabilities[name] = adapter.capabilities


def install_worker(context: ChannelContext) -> None:
    """The ``switchboard.workers`` entry point: consume the inbox of every configured channel here.

    No routes and no ``start`` (no webhook registration, no polling): only the vendor clients that
    send replies, closed when the worker stops."""
    adapters = build_adapters(context)
    _register_handlers(context, adapters)
    install_connections(context, routes=False)
    for adapter in adapters.values():
        context.on_stop.append(adapter.stop)


def install(app: FastAPI, context: ChannelContext) -> None:
    """The ``switchboard.plugins`` entry point: mount every configured channel on the app."""
    adapters = build_adapters(context)
    _register_handlers(context, adapters)
    for kind in install_connections(context, routes=True):  # channel connections' webhooks, matched first
        app.router.routes[:0] = kind.routes()
        for path, operation in kind.described().items():
            describe_operation(app, path, "post", operation)
    for name, adapter in adapters.items():
        _mount(app, adapter.router())
        _describe_webhooks(app, name)
        context.on_start.append(adapter.start)
        context.on_stop.append(adapter.stop)
    app.state.channels = adapters
    # The widget talks to /api/chat from the sites that embed it (SWITCHBOARD_WIDGET_ORIGINS, default any);
    # auth is the session bearer token (no cookies).
    app.add_middleware(
        CORSMiddleware,
        allow_origins=context.settings.widget_origin_list,
        allow_methods=["GET", "POST", "OPTIONS"],
        allow_headers=["Authorization", "Content-Type", "X-Chat-Session"],  # the last: a visitor's vote
    )

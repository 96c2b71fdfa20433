"""Every channel adapter, one line each. Adding a channel = one module + one line here."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from channels import slack, telegram, twilio_sms, twilio_voice, webchat
from gateway.channel import ChannelAdapter, ChannelFactory
from gateway.services import Services

FACTORIES: dict[str, ChannelFactory] = {
    "webchat": webchat.build,
    "telegram": telegram.build,
    "slack": slack.build,
    "twilio_sms": twilio_sms.build,
    "twilio_voice": twilio_voice.build,
}


def build_adapters(services: Services) -> dict[str, ChannelAdapter]:
    adapters = {}
    for name, factory in FACTORIES.items():
        adapter = factory(services)
        if adapter is not None:
            adapters[name] = adapter
    return adapters


def install(app: FastAPI, services: Services) -> None:
    """The ``switchboard.plugins`` entry point: mount every configured channel on the app."""
    adapters = build_adapters(services)
    for adapter in adapters.values():
        app.include_router(adapter.router())
        services.on_start.append(adapter.start)
        services.on_stop.append(adapter.stop)
    app.state.channels = adapters
    # The widget talks to /api/chat from any site that embeds it; auth is the session bearer token
    # (no cookies), so any origin may call it.
    app.add_middleware(
        CORSMiddleware,
        allow_origins=["*"],
        allow_methods=["GET", "POST", "OPTIONS"],
        allow_headers=["Authorization", "Content-Type"],
    )

"""The HTTP surface of prompt assembly and live context, included by the app factory."""

from __future__ import annotations

from fastapi import FastAPI

from gateway.http import attributes, feeds, inbox, personas, prompt_preview, templates
from gateway.http.responses import ADMIN, WEBHOOK


def include_live_routes(app: FastAPI) -> None:
    for module in (templates, attributes, personas, prompt_preview, inbox):
        app.include_router(module.router, responses=ADMIN)
    app.include_router(feeds.router, responses=WEBHOOK)

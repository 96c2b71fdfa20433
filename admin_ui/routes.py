"""Admin UI routes, installed through the ``switchboard.plugins`` entry point."""

from __future__ import annotations

from fastapi import FastAPI

from gateway.channel import ChannelContext


def install(app: FastAPI, context: ChannelContext) -> None:
    """Mount the operator UI (filled in by the admin UI work)."""

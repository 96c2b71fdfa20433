"""Admin UI routes, installed through the ``switchboard.plugins`` entry point."""

from __future__ import annotations

from fastapi import FastAPI

from gateway.services import Services


def install(app: FastAPI, services: Services) -> None:
    """Mount the operator UI (filled in by the admin UI work)."""

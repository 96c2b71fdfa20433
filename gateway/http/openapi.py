"""The app's OpenAPI document, completed with what FastAPI cannot see: the vendor webhooks are plain
routes (no per-request FastAPI machinery in their ack path), so their adapters describe them here."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from gateway.http.responses import ErrorBody

__all__ = ["describe_operation", "install_openapi"]


def describe_operation(app: FastAPI, path: str, method: str, operation: dict[str, Any]) -> None:
    """Add ``operation`` (an OpenAPI operation object) under ``path`` and ``method`` to the document."""
    _described(app)[(path, method.lower())] = operation


def _described(app: FastAPI) -> dict[tuple[str, str], dict[str, Any]]:
    if not hasattr(app.state, "described_operations"):
        app.state.described_operations = {}
    return app.state.described_operations


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            for (path, method), operation in _described(app).items():
                schema["paths"].setdefault(path, {})[method] = operation
            schemas = schema.setdefault("components", {}).setdefault("schemas", {})
            schemas.setdefault("ErrorBody", ErrorBody.model_json_schema())
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

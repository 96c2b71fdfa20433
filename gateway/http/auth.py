"""Admin authentication: ``Authorization: Bearer <SWITCHBOARD_ADMIN_TOKEN>``."""

from __future__ import annotations

import hmac

from fastapi import Request

from gateway.core.errors import Forbidden, Unauthorized
from gateway.services import Services


def services_of(request: Request) -> Services:
    return request.app.state.services


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def require_admin(request: Request) -> Services:
    services = services_of(request)
    expected = services.settings.admin_token
    if expected is None:
        raise Forbidden("the admin API is disabled: set SWITCHBOARD_ADMIN_TOKEN")
    token = bearer_token(request)
    if token is None:
        raise Unauthorized("missing bearer token")
    if not hmac.compare_digest(token.encode(), expected.get_secret_value().encode()):
        raise Unauthorized("wrong admin token")
    return services

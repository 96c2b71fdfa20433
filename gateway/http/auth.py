"""Admin authentication: ``Authorization: Bearer <SWITCHBOARD_ADMIN_TOKEN>``.

Wrong tokens are counted per client address (``SWITCHBOARD_ADMIN_TOKEN_FAILURES_*``); past the limit
every request from that address is refused (429), the right token too, until the window ends."""

from __future__ import annotations

import hmac

from fastapi import Request
from starlette.requests import HTTPConnection

from gateway.core.errors import Forbidden, Unauthorized
from gateway.services import Services

__all__ = ["bearer_token", "client_address", "require_admin", "services_of"]


def services_of(request: HTTPConnection) -> Services:
    return request.app.state.services


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def client_address(conn: HTTPConnection) -> str:
    """Who the request comes from, for rate limits (``SWITCHBOARD_TRUSTED_PROXIES``)."""
    addresses = services_of(conn).client_addresses
    peer = conn.client.host if conn.client else None
    forwarded = ",".join(conn.headers.getlist("x-forwarded-for"))
    return addresses.resolve(peer, forwarded) if addresses is not None else peer or "unknown"


async def require_admin(request: Request) -> Services:
    services = services_of(request)
    if request.scope.get("state", {}).get("admin"):  # checked once per request (the route, then the dependency)
        return services
    expected = services.settings.admin_token
    if expected is None:
        raise Forbidden("the admin API is disabled: set SWITCHBOARD_ADMIN_TOKEN")
    token = bearer_token(request)
    if token is None:
        raise Unauthorized("missing bearer token")
    assert services.rate_limits is not None
    failures, address = services.rate_limits.admin_token_failures, client_address(request)
    await failures.check(address)
    if not hmac.compare_digest(token.encode(), expected.get_secret_value().encode()):
        await failures.failed(address)
        raise Unauthorized("wrong admin token")
    request.state.admin = True
    return services

"""What every console response carries (security headers) and what every console request must
bring: a live session (else to sign-in, and back afterwards), the right role, and on every
state-changing request the session's CSRF token."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from urllib.parse import quote

from fastapi import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.conversation.console_sessions import ConsoleSession
from gateway.conversation.operators import Operator
from gateway.services import Services

COOKIE = "sb_console"
PREFIX = "/admin"
HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


class SecurityHeaders:
    """Pure ASGI: the console's headers on every response under ``/admin``, errors included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(PREFIX):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [
                    *message.get("headers", []),
                    *((k.encode(), v.encode()) for k, v in HEADERS.items() if k.encode() not in present),
                ]
            await send(message)

        await self.app(scope, receive, with_headers)


class SignInRequired(Exception):
    """No live session: a page answers with a redirect to sign-in, then back to ``next``."""

    def __init__(self, next_path: str) -> None:
        self.next_path = next_path


class NotAllowed(Exception):
    """Signed in, but the role does not allow this action."""


class BadCsrf(Exception):
    """A state-changing request without the session's CSRF token."""


@dataclass(frozen=True)
class Signed:
    session: ConsoleSession
    operator: Operator
    services: Services

    @property
    def is_admin(self) -> bool:
        return self.operator.role == "admin"


def services_of(request: Request) -> Services:
    return request.app.state.services


def sign_in_url(next_path: str) -> str:
    return f"{PREFIX}/login?next={quote(next_path, safe='/')}"


async def signed_in(request: Request) -> Signed:
    services = services_of(request)
    assert services.console_sessions is not None and services.operators is not None
    session = await services.console_sessions.resolve(request.cookies.get(COOKIE))
    operator = await services.operators.get(session.username) if session else None
    if session is None or operator is None:
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise SignInRequired(path if request.method == "GET" else PREFIX)
    return Signed(session, operator, services)


async def admin_only(request: Request) -> Signed:
    signed = await signed_in(request)
    if not signed.is_admin:
        raise NotAllowed()
    return signed


async def check_csrf(request: Request, signed: Signed) -> None:
    form = await request.form()
    sent = form.get("csrf_token") or request.headers.get("x-csrf-token") or ""
    if not isinstance(sent, str) or not hmac.compare_digest(sent, signed.session.csrf):
        raise BadCsrf()

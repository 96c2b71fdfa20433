"""Sign-in and sign-out. A wrong username or password gets one message, whichever was wrong;
failures are limited per username and per client address (``SWITCHBOARD_SIGNIN_FAILURES_*``, counted
before the password check, gateway/conversation/signin_guard.py): past either limit even the right
password waits, on a readable page with ``Retry-After`` — except, past the account's limit, from an
address that recently signed in to that account."""

from __future__ import annotations

import hmac
import secrets

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from admin_ui.render import page
from admin_ui.security import COOKIE, PREFIX, Signed, check_csrf, services_of, signed_in
from gateway.core.command import cli_command
from gateway.core.errors import RateLimited
from gateway.http.auth import client_address

router = APIRouter(prefix=PREFIX)
LOGIN_COOKIE = "sb_console_login"  # the sign-in form's own CSRF token (there is no session yet)
INVALID = "Invalid username or password"


def _safe_next(value: str | None) -> str:
    if not value or not value.startswith(PREFIX) or value.startswith("//") or "\\" in value:
        return PREFIX
    return value


def _login_page(request: Request, *, next_path: str, username: str = "", error: str | None = None,
                status_code: int = 200, first_run: bool = False) -> Response:
    token = secrets.token_urlsafe(24)
    response = page(request, "login.html", None, status_code, login_token=token, next=next_path,
                    username=username, error=error, first_run=first_run,
                    cli=cli_command())
    response.set_cookie(LOGIN_COOKIE, token, httponly=True, samesite="strict", path=f"{PREFIX}/login",
                        secure=_secure(request))
    return response


def _secure(request: Request) -> bool:
    return services_of(request).settings.public_url.startswith("https://")


@router.get("/login")
async def login_form(request: Request, next: str | None = None) -> Response:
    operators = services_of(request).operators
    first_run = operators is not None and await operators.count() == 0
    return _login_page(request, next_path=_safe_next(next), first_run=first_run)


@router.post("/login")
async def login(request: Request) -> Response:
    services = services_of(request)
    assert services.operators and services.console_sessions
    form = await request.form()
    typed = str(form.get("username", ""))
    username = typed.strip()[:64]  # shown again in the form; the account is what the guard resolves
    password = str(form.get("password", ""))
    next_path = _safe_next(str(form.get("next", "")))
    sent = str(form.get("login_token", ""))
    expected = request.cookies.get(LOGIN_COOKIE, "")
    if not expected or not hmac.compare_digest(sent, expected):
        return _login_page(request, next_path=next_path, username=username, status_code=403,
                           error="The sign-in form expired. Please try again.")
    assert services.signin is not None
    try:  # counted before the password is checked, so a burst cannot outrun the limit
        admission = await services.signin.admit(typed, client_address(request))
    except RateLimited as exc:
        wait = exc.retry_after_s
        when = f"{wait} second(s)" if wait < 60 else f"{round(wait / 60)} minute(s)"
        response = _login_page(request, next_path=next_path, username=username, status_code=429,
                               error=f"Too many failed sign-ins. Try again in {when}.")
        response.headers["retry-after"] = str(wait)
        return response
    # The password is checked for exactly the account that was counted (None: no possible account,
    # checked against nothing, as slowly).
    operator = await services.operators.verify(admission.account or "", password) if password else None
    if operator is None:
        return _login_page(request, next_path=next_path, username=username, status_code=401, error=INVALID)
    await services.signin.succeeded(admission)
    cookie, _ = await services.console_sessions.open(operator.username)
    response = RedirectResponse(next_path, status_code=303)
    response.set_cookie(COOKIE, cookie, httponly=True, samesite="lax", secure=_secure(request), path=PREFIX,
                        max_age=services.settings.console_max_age_s)
    response.delete_cookie(LOGIN_COOKIE, path=f"{PREFIX}/login")
    return response


@router.post("/logout")
async def logout(request: Request, signed: Signed = Depends(signed_in)) -> Response:
    await check_csrf(request, signed)
    assert signed.services.console_sessions is not None
    await signed.services.console_sessions.close(request.cookies.get(COOKIE))
    response = RedirectResponse(f"{PREFIX}/login", status_code=303)
    response.delete_cookie(COOKIE, path=PREFIX)
    return response

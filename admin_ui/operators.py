"""Operators (admins only): add, change role, reset password, remove. Every action is refused on
the server for an operator, whatever the page shows."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from admin_ui.notices import notice
from admin_ui.render import page
from admin_ui.security import PREFIX, Signed, admin_only, check_csrf
from gateway.core.errors import GatewayError

router = APIRouter(prefix=f"{PREFIX}/operators")


async def _list(request: Request, signed: Signed, status_code: int = 200, **context) -> Response:
    assert signed.services.operators is not None
    return page(request, "operators.html", signed, status_code, operators=await signed.services.operators.all(),
                **context)


@router.get("")
async def operators(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    return await _list(request, signed, done=request.query_params.get("done"))


@router.post("")
async def add(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    username, role = str(form.get("username", "")), str(form.get("role", "operator"))
    assert signed.services.operators is not None
    try:
        created = await signed.services.operators.create(username, str(form.get("password", "")), role)  # type: ignore[arg-type]
    except GatewayError as exc:  # shown next to the form, with what was typed kept
        return await _list(request, signed, 422, error=str(exc), typed={"username": username, "role": role})
    done = notice(signed, f"added {created.username}")
    return RedirectResponse(f"{PREFIX}/operators?done={done}", status_code=303)


@router.post("/{username}")
async def change(username: str, request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    action = str(form.get("action", ""))
    operators, sessions = signed.services.operators, signed.services.console_sessions
    assert operators is not None and sessions is not None
    # Sessions are kept under the account's canonical name (the one the change resolves), whatever
    # spelling the URL used: /operators/ALICE resets alice and signs alice out.
    try:
        if action == "role":
            changed = await operators.set_role(username, str(form.get("role", "")))  # type: ignore[arg-type]
        elif action == "password":
            changed = await operators.reset_password(username, str(form.get("password", "")))
            await sessions.close_all(changed.username)  # a new password signs the old sessions out
        elif action == "remove":
            changed = await operators.remove(username)
            await sessions.close_all(changed.username)
        else:
            return await _list(request, signed, 422, error=f"unknown action {action!r}")
    except GatewayError as exc:
        return await _list(request, signed, 422, error=str(exc))
    done = notice(signed, f"{action} {changed.username}")
    return RedirectResponse(f"{PREFIX}/operators?done={done}", status_code=303)

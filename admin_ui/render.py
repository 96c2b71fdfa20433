"""Page rendering: one Jinja2 environment (autoescaped) for the console's templates, and the
context every page gets (who is signed in, the CSRF token, the navigation)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from admin_ui.notices import shown
from admin_ui.security import Signed

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))


def when(value: datetime | float | int | None) -> str:
    """A moment as people read it (UTC), from a datetime or Unix seconds; empty when unknown."""
    if value is None or value == "":
        return ""
    moment = value if isinstance(value, datetime) else datetime.fromtimestamp(float(value), UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


TEMPLATES.env.filters["when"] = when
NAV = (
    ("Overview", "/admin"),
    ("Conversations", "/admin/conversations"),
    ("Knowledge", "/admin/knowledge"),
    ("Prompt", "/admin/prompt"),
    ("Live data", "/admin/live"),
    ("Inbox", "/admin/inbox"),
    ("Insights", "/admin/insights"),
)
ADMIN_NAV = (("Operators", "/admin/operators"), ("Channels", "/admin/channels"), ("Tools", "/admin/tools"))


def page(
    request: Request, template: str, signed: Signed | None, status_code: int = 200, **context: Any
) -> HTMLResponse:
    nav = [*NAV, *(ADMIN_NAV if signed and signed.is_admin else ())]
    for key in ("done", "notice"):  # from ?done=: only a notice the console made for this session shows
        if key in context:
            context[key] = shown(signed, context[key])
    return TEMPLATES.TemplateResponse(
        request, template,
        {
            "signed": signed, "csrf": signed.session.csrf if signed else "", "current": request.url.path,
            "nav": nav, **context,
        },
        status_code=status_code,
    )

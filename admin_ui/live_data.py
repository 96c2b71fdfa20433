"""Live data: typed forms for the customer attributes the prompt is made of — the business, time zone,
business hours, closed dates, data injection (URL, period, summary; the last fetch's time, status
and data age) — active feeds with their expiry, a persona's custom sections, and the 45-day
calendar as the agent sees it. Every save goes through ``CustomerAttributes.set`` (the same typed
validation as ``PUT /api/attributes``); live context follows through the ``AttributeChanged`` event.
Admins change; operators read."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from admin_ui.agent_use import agents_using
from admin_ui.notices import notice
from admin_ui.render import page
from admin_ui.security import PREFIX, Signed, admin_only, check_csrf, signed_in
from gateway.core.errors import GatewayError
from gateway.live.calendar import BUSINESS_HOURS, CLOSED_DATES, TIMEZONE
from gateway.live.data_injection import ENABLED, FETCHED_AT, NEEDS_SUMMARY, PAYLOAD, PERIOD, RETRIEVED, STATUS, URL
from gateway.live.prompt import AGENT_NAME, BUSINESS_INSTRUCTIONS, BUSINESS_NAME

router = APIRouter(prefix=f"{PREFIX}/live")
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
FORMS = ("business", "hours", "closed", "injection")


async def _page(request: Request, signed: Signed, status_code: int = 200, **context) -> Response:
    services = signed.services
    values = await services.customer_attributes.all()
    persona_id = str(context.pop("persona_id", None) or request.query_params.get("persona", "")).strip()
    sections, persona_error = None, None
    if persona_id:
        if await services.store.get_persona(persona_id) is None:
            persona_error = f"Persona: no persona {persona_id!r}"
        else:
            sections = await services.live.sections.all(persona_id)
    fetched = values[FETCHED_AT.name]
    age = _age(fetched) if fetched else None
    typed = context.pop("typed", {})
    return page(request, "live_data.html", signed, status_code, values=values, typed=typed, days=DAYS,
                names={"agent": AGENT_NAME.name, "business": BUSINESS_NAME.name,
                       "instructions": BUSINESS_INSTRUCTIONS.name, "timezone": TIMEZONE.name,
                       "hours": BUSINESS_HOURS.name, "closed": CLOSED_DATES.name, "enabled": ENABLED.name,
                       "period": PERIOD.name, "summary": NEEDS_SUMMARY.name, "url": URL.name, "payload": PAYLOAD.name},
                fetch={"status": values[STATUS.name], "fetched_at": fetched, "age": age,
                       "data": values[RETRIEVED.name]},
                closed_text="\n".join(f"{d} {reason}".strip() for d, reason in sorted(
                    (str(k), v) for k, v in (values[CLOSED_DATES.name] or {}).items())),
                feeds=await services.live.feeds.live(None), calendar=await services.live.calendar.current(),
                persona_id=persona_id, sections=sections, persona_error=persona_error,
                agent_use=await agents_using(services), done=request.query_params.get("done"), **context)


def _age(fetched: Any) -> str:
    at = fetched if isinstance(fetched, datetime) else datetime.fromisoformat(str(fetched))
    seconds = int((datetime.now(UTC) - at).total_seconds())
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 60} min {seconds % 60} s"


@router.get("")
async def live_data(request: Request, signed: Signed = Depends(signed_in)) -> Response:
    return await _page(request, signed)


def _changes(form_name: str, form) -> dict[str, Any]:
    """The attribute values a form sets, typed as the attribute wants them (validation is the spec's)."""
    if form_name == "business":
        return {AGENT_NAME.name: str(form.get("agent", "")), BUSINESS_NAME.name: str(form.get("business", "")),
                BUSINESS_INSTRUCTIONS.name: str(form.get("instructions", ""))}
    if form_name == "hours":
        hours = {day: str(form.get(day, "")).strip() for day in DAYS}
        return {TIMEZONE.name: str(form.get("timezone", "")).strip(),
                BUSINESS_HOURS.name: {day: value for day, value in hours.items() if value}}
    if form_name == "closed":
        closed: dict[str, str] = {}
        for number, line in enumerate(str(form.get("closed", "")).splitlines(), 1):
            if not line.strip():
                continue
            day, _, reason = line.strip().partition(" ")
            try:
                closed[date.fromisoformat(day).isoformat()] = reason.strip()
            except ValueError:
                problem = f"Closed dates, line {number}: {day!r} is not a date like 2026-12-25"
                raise FieldError("closed", problem) from None
        return {CLOSED_DATES.name: closed}
    if form_name == "injection":
        period = str(form.get("period", "")).strip()
        return {URL.name: str(form.get("url", "")).strip(), PERIOD.name: int(period) if period.isdigit() else period,
                ENABLED.name: form.get("enabled") == "on", NEEDS_SUMMARY.name: form.get("summary") == "on",
                PAYLOAD.name: str(form.get("payload", ""))}
    raise FieldError("form", f"unknown form {form_name!r}")


class FieldError(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


@router.post("/save")
async def save(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    form_name = str(form.get("form", ""))
    typed = {k: str(v) for k, v in form.items() if k != "csrf_token"}
    attributes = signed.services.customer_attributes
    try:
        changes = _changes(form_name, form)
        for name, value in changes.items():  # each one validated before any is written
            attributes.spec(name).validate(value)
        for name, value in changes.items():
            await attributes.set(name, value)
    except FieldError as exc:
        return await _page(request, signed, 422, typed=typed, error_form=form_name, error=exc.message)
    except (GatewayError, ValueError, TypeError) as exc:
        message = exc.message if isinstance(exc, GatewayError) else str(exc)
        return await _page(request, signed, 422, typed=typed, error_form=form_name, error=message)
    return RedirectResponse(f"{PREFIX}/live?done={notice(signed, f'saved {form_name}')}", status_code=303)


@router.post("/sections")
async def section(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    persona_id, name = str(form.get("persona_id", "")).strip(), str(form.get("section", "")).strip()
    value = str(form.get("value", ""))
    sections = signed.services.live.sections
    try:
        if await signed.services.store.get_persona(persona_id) is None:
            raise FieldError("persona", f"Persona: no persona {persona_id!r}")
        if len(value) > signed.services.settings.max_value_chars:
            raise FieldError("value", f"Text: {len(value)} characters; the limit is "
                                      f"{signed.services.settings.max_value_chars}")
        if form.get("action") == "remove":
            await sections.remove(persona_id, name)
        else:
            await sections.inject(persona_id, name, value)
    except (FieldError, GatewayError) as exc:
        return await _page(request, signed, 422, persona_id=persona_id, section_error=exc.message,
                           typed_section={"section": name, "value": value})
    return RedirectResponse(f"{PREFIX}/live?persona={persona_id}&done={notice(signed, f'section {name}')}",
                            status_code=303)

"""Prompt: the template editor (line numbers; "Save" refuses a broken template with its line and keeps
the old one live; a save after someone else's is refused, not overwritten), version history with a
diff and "Restore", and "Preview" — the compiled messages a turn would send now, with each section's
size against its budget, through ``TurnPipeline.preview`` as ``POST /api/prompt/preview``. Admins
edit; operators read and preview."""

from __future__ import annotations

import difflib

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from admin_ui.agent_use import agents_using
from admin_ui.notices import notice
from admin_ui.render import page
from admin_ui.security import PREFIX, Signed, admin_only, check_csrf, signed_in
from gateway.core.errors import GatewayError
from gateway.core.models import Persona
from gateway.live.template_render import RenderBudget
from gateway.live.template_store import TEMPLATE_VARIABLES, TemplateInvalid

router = APIRouter(prefix=f"{PREFIX}/prompt")


def _name(value: object) -> str:
    name = str(value or "system")
    return name if name in TEMPLATE_VARIABLES else "system"


async def _page(request: Request, signed: Signed, name: str, status_code: int = 200, **context) -> Response:
    templates = signed.services.live.templates
    current = await templates.get(name)
    history = await templates.history(name)
    diff_of = request.query_params.get("diff")
    diff = None
    if diff_of is not None and diff_of.isdigit() and int(diff_of) < len(history):
        old = history[int(diff_of)]
        diff = list(difflib.unified_diff(old.source.splitlines(), current.source.splitlines(),
                                         fromfile=f"version {int(diff_of) + 1} back", tofile="current", lineterm=""))
    source = context.pop("typed", None)
    return page(request, "prompt.html", signed, status_code, name=name, names=sorted(TEMPLATE_VARIABLES),
                live=current, history=list(enumerate(history)), diff=diff, diff_of=diff_of,
                source=current.source if source is None else source,
                variables=sorted(TEMPLATE_VARIABLES[name]), done=request.query_params.get("done"),
                agent_use=await agents_using(signed.services), **context)


@router.get("")
async def prompt(request: Request, signed: Signed = Depends(signed_in)) -> Response:
    return await _page(request, signed, _name(request.query_params.get("name")))


async def _save(request: Request, signed: Signed, name: str, source: str, expected: str, done: str) -> Response:
    settings = signed.services.settings
    try:
        if len(source) > settings.max_value_chars:
            raise TemplateInvalid(name, None, f"{len(source)} characters; the limit is {settings.max_value_chars}")
        await signed.services.live.templates.put(name, source, RenderBudget.from_settings(settings),
                                                 expected=expected or None)
    except GatewayError as exc:  # broken, over budget, or stale: said next to the editor, the text kept
        return await _page(request, signed, name, 422 if isinstance(exc, TemplateInvalid) else 409,
                           typed=source, error=exc.message, error_line=getattr(exc, "line", None))
    return RedirectResponse(f"{PREFIX}/prompt?name={name}&done={notice(signed, done.replace('+', ' '))}",
                            status_code=303)


@router.post("/save")
async def save(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    name = _name(form.get("name"))
    return await _save(request, signed, name, str(form.get("source", "")).replace("\r\n", "\n"),
                       str(form.get("version", "")), "saved")


@router.post("/restore")
async def restore(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    name = _name(form.get("name"))
    history = await signed.services.live.templates.history(name)
    index = str(form.get("index", ""))
    if not index.isdigit() or int(index) >= len(history):
        return await _page(request, signed, name, 422, error="That version is no longer in the history.")
    return await _save(request, signed, name, history[int(index)].source, str(form.get("version", "")), "restored")


@router.post("/preview")
async def preview(request: Request, signed: Signed = Depends(signed_in)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    name = _name(form.get("name"))
    typed = {k: str(form.get(k, "")).strip() for k in ("persona_id", "channel", "text")}
    services = signed.services
    problem = None
    persona = Persona(display_name="preview")
    if typed["persona_id"]:
        found = await services.store.get_persona(typed["persona_id"])
        if found is None:
            problem = f"Persona: no persona {typed['persona_id']!r}"
        persona = found or persona
    channel = typed["channel"] or "preview"
    if not typed["text"] or len(typed["text"]) > services.settings.max_message_chars:
        problem = problem or f"Message: between 1 and {services.settings.max_message_chars} characters"
    if problem:
        return await _page(request, signed, name, 422, preview_error=problem, preview_typed=typed)
    compiled = await services.pipeline.preview(persona, typed["text"], channel=channel)
    return await _page(request, signed, name, preview_typed=typed, compiled=compiled,
                       budgets=services.prompts.budgets)

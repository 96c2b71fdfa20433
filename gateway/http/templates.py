"""``GET/PUT /api/templates/{name}``: operator-editable prompt templates (admin). A save whose trial
render goes over the render budget (settings ``template_render_timeout_s``, ``template_max_output_chars``)
is refused like a broken one."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from gateway.core.errors import PayloadTooLarge
from gateway.http.auth import require_admin
from gateway.http.json_body import AdminRoute
from gateway.live.template_render import RenderBudget
from gateway.live.template_store import TEMPLATE_VARIABLES, TemplateVersion
from gateway.services import Services

router = APIRouter(prefix="/api/templates", route_class=AdminRoute)


class TemplateBody(BaseModel):
    source: str
    expected_version: str | None = None  # the ``version`` read before editing: a save after another is 409


class TemplateOut(BaseModel):
    name: str
    source: str
    is_default: bool
    saved_at: datetime | None
    previous_versions: int
    variables: list[str]
    version: str


def _out(version: TemplateVersion) -> TemplateOut:
    return TemplateOut(
        name=version.name, source=version.source, is_default=version.is_default,
        saved_at=version.saved_at, previous_versions=version.previous_versions,
        variables=sorted(TEMPLATE_VARIABLES[version.name]), version=version.fingerprint,
    )


@router.get("")
async def list_templates(services: Services = Depends(require_admin)) -> dict:
    return {"templates": sorted(TEMPLATE_VARIABLES)}


@router.get("/{name}")
async def get_template(name: str, services: Services = Depends(require_admin)) -> TemplateOut:
    return _out(await services.live.templates.get(name))


@router.put("/{name}")
async def put_template(name: str, body: TemplateBody, services: Services = Depends(require_admin)) -> TemplateOut:
    limit = services.settings.max_value_chars
    if len(body.source) > limit:
        raise PayloadTooLarge(
            f"source is {len(body.source)} characters; the limit is {limit} (SWITCHBOARD_MAX_VALUE_CHARS)")
    budget = RenderBudget.from_settings(services.settings)
    return _out(await services.live.templates.put(name, body.source, budget, expected=body.expected_version))


@router.get("/{name}/versions")
async def template_versions(name: str, services: Services = Depends(require_admin)) -> dict:
    versions = await services.live.templates.history(name)
    return {"name": name, "versions": [
        {"source": v.source, "is_default": v.is_default, "saved_at": v.saved_at} for v in versions
    ]}

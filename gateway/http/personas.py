"""Persona attributes and custom prompt sections (admin):
``GET /api/personas/{id}/attributes``, ``PUT/DELETE /api/personas/{id}/sections/{name}``."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from gateway.core.errors import NotFound, PayloadTooLarge
from gateway.http.auth import require_admin
from gateway.http.json_body import AdminRoute
from gateway.services import Services

router = APIRouter(prefix="/api/personas", route_class=AdminRoute)


class SectionBody(BaseModel):
    value: str


async def _existing(services: Services, persona_id: str) -> str:
    if await services.store.get_persona(persona_id) is None:
        raise NotFound(f"no persona {persona_id!r}")
    return persona_id


@router.get("/{persona_id}/attributes")
async def persona_attributes(persona_id: str, services: Services = Depends(require_admin)) -> dict:
    await _existing(services, persona_id)
    return {
        "persona_id": persona_id,
        "attributes": await services.persona_attributes.all(persona_id),
        "sections": await services.live.sections.all(persona_id),
    }


@router.put("/{persona_id}/sections/{name}")
async def put_section(
    persona_id: str, name: str, body: SectionBody, services: Services = Depends(require_admin)
) -> dict:
    limit = services.settings.max_value_chars
    if len(body.value) > limit:
        raise PayloadTooLarge(f"value is {len(body.value)} characters; the limit is {limit}")
    await _existing(services, persona_id)
    sections = await services.live.sections.inject(persona_id, name, body.value)
    return {"persona_id": persona_id, "sections": sections}


@router.delete("/{persona_id}/sections/{name}")
async def delete_section(persona_id: str, name: str, services: Services = Depends(require_admin)) -> dict:
    await _existing(services, persona_id)
    sections = await services.live.sections.remove(persona_id, name)
    return {"persona_id": persona_id, "sections": sections}

"""``POST /api/prompt/preview``: the compiled prompt a turn would send now (admin).

Runs ``TurnPipeline.preview`` — memory, context preparers and prompt assembly exactly as a real
turn — without storing anything or calling the language model."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from gateway.core.errors import NotFound, PayloadTooLarge
from gateway.core.models import Persona
from gateway.http.auth import require_admin
from gateway.http.json_body import AdminRoute
from gateway.services import Services

router = APIRouter(prefix="/api/prompt", route_class=AdminRoute)


class PreviewRequest(BaseModel):
    persona_id: str | None = None
    text: str = Field(min_length=1)
    channel: str = Field(default="preview", pattern=r"^[a-z_]{1,32}$")


@router.post("/preview")
async def preview(body: PreviewRequest, services: Services = Depends(require_admin)) -> dict:
    if len(body.text) > services.settings.max_message_chars:
        raise PayloadTooLarge(f"text is longer than {services.settings.max_message_chars} characters")
    if body.persona_id is None:
        persona = Persona(display_name="preview")
    else:
        found = await services.store.get_persona(body.persona_id)
        if found is None:
            raise NotFound(f"no persona {body.persona_id!r}")
        persona = found
    prompt = await services.pipeline.preview(persona, body.text, channel=body.channel)
    return {
        "messages": [m.model_dump() for m in prompt.messages],
        "sections": prompt.sections,
    }

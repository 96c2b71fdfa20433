"""Admin API for tool sources (MCP servers, OpenAPI documents): ``/api/tool-sources`` and
``/api/tool-sources/{id}``.

Headers are write-only: every answer shows their values masked. Saving a source (and
``POST /api/tool-sources/{id}/refresh``) asks the server for its tools; one that cannot be reached is
saved with the error in ``status`` and no tools. ``POST /api/tool-sources/{id}/tools/{name}/try``
calls one tool as a turn would, for an operator checking it works.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.core.errors import InvalidInput
from gateway.http.auth import require_admin
from gateway.http.json_body import AdminRoute, read_json
from gateway.http.responses import json_body
from gateway.services import Services
from gateway.tools.service import SourceCreate, SourcePatch, ToolSources
from gateway.tools.trial import try_tool

__all__ = ["router"]

class ToolTry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    arguments: dict[str, Any] = Field(default_factory=dict)


router = APIRouter(prefix="/api/tool-sources", route_class=AdminRoute)


def _sources(services: Services) -> ToolSources:
    assert services.tool_sources is not None  # built in ``Services.build``
    return services.tool_sources


@router.post("", status_code=201, openapi_extra=json_body(SourceCreate))
async def create_tool_source(request: Request, services: Services = Depends(require_admin)) -> dict:
    return (await _sources(services).create(await read_json(request))).public()


@router.get("")
async def list_tool_sources(services: Services = Depends(require_admin)) -> dict:
    return {"tool_sources": [s.public() for s in await _sources(services).list()]}


@router.get("/{source_id}")
async def get_tool_source(source_id: str, services: Services = Depends(require_admin)) -> dict:
    return (await _sources(services).get(source_id)).public()


@router.patch("/{source_id}", openapi_extra=json_body(SourcePatch))
async def patch_tool_source(source_id: str, request: Request, services: Services = Depends(require_admin)) -> dict:
    return (await _sources(services).update(source_id, await read_json(request))).public()


@router.post("/{source_id}/refresh")
async def refresh_tool_source(source_id: str, services: Services = Depends(require_admin)) -> dict:
    return (await _sources(services).refresh(source_id)).public()


@router.delete("/{source_id}", status_code=204)
async def delete_tool_source(source_id: str, services: Services = Depends(require_admin)) -> Response:
    await _sources(services).delete(source_id)
    return Response(status_code=204)


@router.post("/{source_id}/tools/{tool_name}/try", openapi_extra=json_body(ToolTry))
async def try_a_tool(source_id: str, tool_name: str, request: Request,
                     services: Services = Depends(require_admin)) -> dict:
    """Call the tool ``tool_name`` (``shop.getOrder``) with ``arguments`` now, through the same client and
    outbound guard a turn uses: ``{"tool", "result", "error", "ms"}``, the source's secrets masked. The call
    is real (an OpenAPI tool gets an ``Idempotency-Key`` of ``try:<id>``) and logged."""
    try:
        spec = ToolTry.model_validate(await read_json(request))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InvalidInput(f"{'.'.join(map(str, first['loc'])) or 'body'}: {first['msg']}") from None
    return await try_tool(_sources(services), source_id, tool_name, spec.arguments, services.settings.tool_timeout_s)

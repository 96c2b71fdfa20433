"""Admin API for named knowledge bases: create, list, describe, change, delete."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from gateway.core.errors import InvalidInput
from gateway.http.auth import require_admin
from gateway.http.json_body import AdminRoute, read_json
from gateway.http.knowledge import kb_call
from gateway.http.responses import json_body
from gateway.knowledge.bases import KnowledgeBaseDescription
from gateway.services import Services

router = APIRouter(prefix="/api/kb/bases", route_class=AdminRoute)


def _described(description: KnowledgeBaseDescription) -> dict[str, Any]:
    return description.model_dump(mode="json")


def _object(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidInput("body: expected a JSON object")
    unknown = sorted(set(data) - {"name", "description", "chunking"})
    if unknown:
        raise InvalidInput(f"body: unknown field(s) {', '.join(unknown)} (known: name, description, chunking)")
    if "description" in data and not isinstance(data["description"], str):
        raise InvalidInput("description: must be a string")
    if "chunking" in data and not isinstance(data["chunking"], dict):
        raise InvalidInput("chunking: must be an object like {\"strategy\": \"recursive\", \"chunk_tokens\": 256}")
    return data


@router.get("")
async def list_bases(services: Services = Depends(require_admin)) -> dict:
    bases = services.knowledge.bases
    names = [info.name for info in await kb_call(bases.catalog.all())]
    return {"bases": [_described(await kb_call(bases.describe(name))) for name in names]}


_BASE = {"type": "object", "properties": {
    "name": {"type": "string"}, "description": {"type": "string"},
    "chunking": {"type": "object", "description": "Chunk size and overlap for this base's documents"}}}


@router.post("", status_code=201, openapi_extra=json_body({**_BASE, "required": ["name"]}))
async def create_base(request: Request, services: Services = Depends(require_admin)) -> dict:
    data = _object(await read_json(request))
    name = data.get("name")
    if not isinstance(name, str):
        raise InvalidInput("name: required, a string like \"products\"")
    bases = services.knowledge.bases
    await kb_call(bases.create(name, data.get("description", ""), data.get("chunking")))
    return _described(await kb_call(bases.describe(name)))


@router.get("/{name}")
async def describe_base(name: str, services: Services = Depends(require_admin)) -> dict:
    return _described(await kb_call(services.knowledge.bases.describe(name)))


@router.patch("/{name}", openapi_extra=json_body(_BASE))
async def change_base(name: str, request: Request, services: Services = Depends(require_admin)) -> dict:
    data = _object(await read_json(request))
    if data.get("name", name) != name:
        raise InvalidInput("name: a knowledge base cannot be renamed")
    bases = services.knowledge.bases
    await kb_call(bases.update(name, description=data.get("description"), chunking=data.get("chunking")))
    return _described(await kb_call(bases.describe(name)))


@router.delete("/{name}", status_code=204)
async def delete_base(name: str, services: Services = Depends(require_admin)) -> Response:
    await kb_call(services.knowledge.bases.delete(name))
    return Response(status_code=204)

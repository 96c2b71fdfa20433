"""Admin API for the agent API's keys: ``POST /api/keys`` (the key is in this answer only),
``GET /api/keys`` (never a key), ``DELETE /api/keys/{id}`` (revoked at once)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from pydantic import ValidationError

from gateway.agents.api_keys import ApiKeyCreate
from gateway.core.errors import BadRequest, InvalidInput, NotFound
from gateway.http.auth import require_admin
from gateway.http.json_body import AdminRoute, read_json
from gateway.http.responses import json_body
from gateway.services import Services

__all__ = ["router"]

router = APIRouter(prefix="/api/keys", route_class=AdminRoute)
SHAPE = '{"name": "...", "agents": ["<agent id or name>", ...], "rate_limit_per_min"?: n}'


async def _spec(request: Request, services: Services) -> ApiKeyCreate:
    data = await read_json(request)
    if not isinstance(data, dict):
        raise BadRequest(f"body: expected {SHAPE}")
    try:
        spec = ApiKeyCreate.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadRequest(f"{'.'.join(map(str, first['loc'])) or 'body'}: {first['msg']}") from None
    ids = []
    for ref in spec.agents:  # an agent's id or its name; the key keeps the id (a rename keeps the scope)
        try:
            ids.append((await services.agents.find(ref)).id)
        except NotFound:
            raise BadRequest(f"agents: no agent {ref!r}; GET /v1/agents lists them") from None
    return spec.model_copy(update={"agents": ids})


@router.post("", status_code=201, openapi_extra=json_body(ApiKeyCreate))
async def create_key(request: Request, services: Services = Depends(require_admin)) -> dict:
    spec = await _spec(request, services)
    try:
        record, key = await services.api_keys.create(spec.name, spec.agents, spec.rate_limit_per_min)
    except InvalidInput as exc:
        raise BadRequest(exc.message) from None
    return {**record.model_dump(), "key": key}


@router.get("")
async def list_keys(services: Services = Depends(require_admin)) -> dict:
    return {"keys": [k.model_dump() for k in await services.api_keys.list()]}


@router.delete("/{key_id}", status_code=204)
async def revoke_key(key_id: str, services: Services = Depends(require_admin)) -> Response:
    await services.api_keys.revoke(key_id)
    return Response(status_code=204)

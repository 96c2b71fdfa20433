"""Admin API for channel connections: ``/api/connections`` and ``/api/connections/{id}``.

Credentials are write-only: every answer shows them masked (last 4 characters), with the
``webhook_url`` the vendor must call. ``POST /api/connections/{id}/verify`` asks the vendor again.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from gateway.connections.service import ConnectionCreate, ConnectionPatch, Connections
from gateway.http.auth import require_admin
from gateway.http.json_body import AdminRoute, read_json
from gateway.http.responses import json_body
from gateway.services import Services

__all__ = ["router"]

router = APIRouter(prefix="/api/connections", route_class=AdminRoute)


def _connections(services: Services) -> Connections:
    assert services.connections is not None  # built in ``Services.build``
    return services.connections


@router.post("", status_code=201, openapi_extra=json_body(ConnectionCreate))
async def create_connection(request: Request, services: Services = Depends(require_admin)) -> dict:
    connection = await _connections(services).create(await read_json(request))
    return connection.public(services.settings.public_url)


@router.get("")
async def list_connections(services: Services = Depends(require_admin)) -> dict:
    url = services.settings.public_url
    return {"connections": [c.public(url) for c in await _connections(services).list()]}


@router.get("/{connection_id}")
async def get_connection(connection_id: str, services: Services = Depends(require_admin)) -> dict:
    return (await _connections(services).get(connection_id)).public(services.settings.public_url)


@router.patch("/{connection_id}", openapi_extra=json_body(ConnectionPatch))
async def patch_connection(connection_id: str, request: Request, services: Services = Depends(require_admin)) -> dict:
    connection = await _connections(services).update(connection_id, await read_json(request))
    return connection.public(services.settings.public_url)


@router.post("/{connection_id}/verify")
async def verify_connection(connection_id: str, services: Services = Depends(require_admin)) -> dict:
    return (await _connections(services).verify_again(connection_id)).public(services.settings.public_url)


@router.delete("/{connection_id}", status_code=204)
async def delete_connection(connection_id: str, services: Services = Depends(require_admin)) -> Response:
    await _connections(services).delete(connection_id)
    return Response(status_code=204)

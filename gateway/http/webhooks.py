"""``/api/webhooks`` (admin): event webhooks — which events go to which URL, signed with whose secret —
and each one's delivery log. The secret is stored encrypted and answered masked; one the gateway made
(none was given) is answered in full once, in the creating answer."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query

from gateway.http.auth import require_admin
from gateway.http.json_body import AdminRoute
from gateway.insight.webhooks import EVENT_TYPES, EndpointIn, EndpointPatch, Webhooks
from gateway.services import Services

router = APIRouter(prefix="/api/webhooks", route_class=AdminRoute)


def _webhooks(services: Services) -> Webhooks:
    assert services.insight is not None
    return services.insight.webhooks


@router.post("", status_code=201)
async def create(spec: EndpointIn, services: Services = Depends(require_admin)) -> dict:
    webhooks = _webhooks(services)
    endpoint, secret, made_here = await webhooks.create(spec)
    return {**endpoint.shown(secret), **({"secret": secret, "secret_shown_once": True} if made_here else {})}


@router.get("")
async def listing(services: Services = Depends(require_admin)) -> dict:
    webhooks = _webhooks(services)
    endpoints = await webhooks.reload()
    ordered = sorted(endpoints.values(), key=lambda e: e.created_at)
    return {"webhooks": [e.shown(webhooks.secret_of(e)) for e in ordered], "events": list(EVENT_TYPES)}


@router.get("/{endpoint_id}")
async def one(endpoint_id: str, services: Services = Depends(require_admin)) -> dict:
    webhooks = _webhooks(services)
    endpoint = await webhooks.get(endpoint_id)
    return endpoint.shown(webhooks.secret_of(endpoint))


@router.patch("/{endpoint_id}")
async def update(endpoint_id: str, patch: EndpointPatch, services: Services = Depends(require_admin)) -> dict:
    webhooks = _webhooks(services)
    endpoint = await webhooks.update(endpoint_id, patch)
    return endpoint.shown(webhooks.secret_of(endpoint))


@router.delete("/{endpoint_id}")
async def delete(endpoint_id: str, services: Services = Depends(require_admin)) -> dict:
    await _webhooks(services).delete(endpoint_id)
    return {"id": endpoint_id, "deleted": True}


@router.get("/{endpoint_id}/deliveries")
async def deliveries(endpoint_id: str, limit: int = Query(100, ge=1, le=10_000),
                     services: Services = Depends(require_admin)) -> dict:
    """The newest delivery attempts, newest first (event, attempt, status, HTTP status, error), and how
    many events wait to be delivered."""
    return {"id": endpoint_id, **await _webhooks(services).deliveries(endpoint_id, limit)}

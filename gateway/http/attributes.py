"""``GET/PUT /api/attributes/{name}``: customer (project) attributes with typed validation (admin)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from gateway.conversation.attributes import AttributeSpec
from gateway.core.errors import Forbidden, PayloadTooLarge
from gateway.http.auth import require_admin
from gateway.http.json_body import AdminRoute
from gateway.services import Services

router = APIRouter(prefix="/api/attributes", route_class=AdminRoute)


class ValueBody(BaseModel):
    value: Any


def _describe(spec: AttributeSpec, value: Any) -> dict[str, Any]:
    return {
        "name": spec.name,
        "value": value,
        "type": getattr(spec.type, "__name__", str(spec.type)),
        "description": spec.description,
        "private": spec.private,
    }


@router.get("")
async def list_attributes(services: Services = Depends(require_admin)) -> dict:
    attrs = services.customer_attributes
    values = await attrs.all()
    return {"attributes": [_describe(attrs.spec(n), values[n]) for n in sorted(values)]}


@router.get("/{name}")
async def get_attribute(name: str, services: Services = Depends(require_admin)) -> dict:
    attrs = services.customer_attributes
    return _describe(attrs.spec(name), await attrs.get(name))


@router.put("/{name}")
async def put_attribute(name: str, body: ValueBody, services: Services = Depends(require_admin)) -> dict:
    attrs = services.customer_attributes
    spec = attrs.spec(name)
    if spec.private:
        raise Forbidden(f"attribute {name!r} is written by the gateway and is read-only here")
    # Text is measured as the characters it holds (a newline is one, not JSON's two); other values as JSON.
    text = isinstance(body.value, str)
    size = len(body.value) if text else len(json.dumps(body.value, ensure_ascii=False))
    if size > services.settings.max_value_chars:
        what = "characters" if text else "characters as JSON"
        raise PayloadTooLarge(f"value is {size} {what}; the limit is {services.settings.max_value_chars}")
    await attrs.set(name, body.value)  # live context follows through the AttributeChanged event
    return _describe(spec, await attrs.get(name))

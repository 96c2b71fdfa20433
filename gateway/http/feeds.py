"""``POST /webhooks/feeds/{feed}``: signed inbound data feeds become prompt sections.

Checks run cheapest first and refuse before anything is stored: size (413), signature and
freshness (401), JSON (400), shape (422). The feed ``data_injection`` is the asynchronous
callback of FetchData and is processed by RetrieveData instead."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import ValidationError

from gateway.core.errors import BadRequest, Forbidden, InvalidInput, NotFound, PayloadTooLarge, Unauthorized
from gateway.http.auth import services_of
from gateway.http.json_body import InvalidJSON, JSONBodyRoute, decode_json
from gateway.http.responses import json_body
from gateway.live.data_injection import CALLBACK_FEED
from gateway.live.feeds import FeedPayload
from gateway.live.sections import validate_section_name

router = APIRouter(prefix="/webhooks/feeds", route_class=JSONBodyRoute)


async def _body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"feed body is larger than {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"feed body is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


_SIGNED = {"parameters": [
    {"name": "X-Switchboard-Timestamp", "in": "header", "required": False, "schema": {"type": "string"},
     "description": "Unix seconds"},
    {"name": "X-Switchboard-Signature", "in": "header", "required": False, "schema": {"type": "string"},
     "description": "sha256=<hex HMAC-SHA256(secret, timestamp + '.' + raw body)>"}]}


@router.post("/{feed}", openapi_extra={**json_body(FeedPayload), **_SIGNED})
async def receive_feed(feed: str, request: Request) -> dict:
    services = services_of(request)
    live = services.live
    validate_section_name(feed)
    body = await _body(request, services.settings.feeds_max_bytes)
    try:
        await live.feeds.verify(
            feed,
            request.headers.get("x-switchboard-timestamp"),
            request.headers.get("x-switchboard-signature"),
            body,
        )
    except (Unauthorized, Forbidden):
        services.metrics.rejected.labels("feeds", "signature").inc()
        raise
    try:
        raw = decode_json(body)
    except InvalidJSON as exc:
        raise BadRequest(exc.message) from None
    try:
        payload = FeedPayload.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidInput(f"{where + ': ' if where else ''}{first['msg']}") from None
    if feed == CALLBACK_FEED:
        status = await live.data_injection.retrieve(payload.text if payload.text is not None else payload.data)
        return {"feed": feed, "scope": "data_injection", "status": status}
    if payload.persona_id is not None and await services.store.get_persona(payload.persona_id) is None:
        raise NotFound(f"no persona {payload.persona_id!r}")
    entry = await live.feeds.put(feed, payload)
    return {
        "feed": feed,
        "scope": "persona" if entry.persona_id else "project",
        "persona_id": entry.persona_id,
        "received_at": entry.received_at.isoformat(),
        "expires_at": entry.expires_at.isoformat() if entry.expires_at else None,
    }

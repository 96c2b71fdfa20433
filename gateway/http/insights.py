"""``GET /api/insights`` (admin): feedback, outcomes, tokens and cost for a range, from the daily
counters; ``POST /api/insights/gaps/{id}/dismiss`` drops a gap group from the list;
``GET /api/conversations/export`` streams the conversations themselves (admin, logged)."""

from __future__ import annotations

import logging
from typing import Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse

from gateway.core.settings import ModelPrice
from gateway.http.auth import require_admin
from gateway.http.json_body import AdminRoute
from gateway.insight.report import InsightQuery
from gateway.services import Services

log = logging.getLogger(__name__)
router = APIRouter(prefix="/api/insights", route_class=AdminRoute)
# Included before the conversations router, whose /api/conversations/{conversation_id} would take "export".
export_router = APIRouter(route_class=AdminRoute)
MEDIA = {"jsonl": "application/x-ndjson", "csv": "text/csv; charset=utf-8"}


@router.get("")
async def insights(start: str = Query("", alias="from"), end: str = Query("", alias="to"),
                   agent: str | None = None, channel: str | None = None, connection: str | None = None,
                   services: Services = Depends(require_admin)) -> dict:
    assert services.insight is not None
    report = await services.insight.insights.report(InsightQuery.parse(start, end, agent, channel, connection))
    if report["by_api_key"] and services.api_keys is not None:
        names = {key.id: key.name for key in await services.api_keys.list()}
        for row in report["by_api_key"]:
            row["name"] = names.get(row["api_key"])  # None: revoked since
    return report


@router.get("/prices")
async def prices(services: Services = Depends(require_admin)) -> dict:
    """The price table (currency units per million tokens): each model's price and where it comes from
    (``edited`` here, ``environment``: SWITCHBOARD_MODEL_PRICES, ``built-in``)."""
    assert services.insight is not None
    await services.insight.price_edits.reload()
    return {"prices": services.insight.prices.rows()}


@router.put("/prices/{model:path}")
async def set_price(model: str, price: ModelPrice, services: Services = Depends(require_admin)) -> dict:
    """Price ``model``'s calls from now on (``{"input", "output"}`` per million tokens); counted costs stay."""
    assert services.insight is not None
    return await services.insight.price_edits.set(model, price)


@router.delete("/prices/{model:path}")
async def remove_price(model: str, services: Services = Depends(require_admin)) -> dict:
    assert services.insight is not None
    await services.insight.price_edits.remove(model)
    return {"model": model, "removed": True}


@router.post("/gaps/{gap_id}/dismiss")
async def dismiss_gap(gap_id: str, services: Services = Depends(require_admin)) -> dict:
    assert services.insight is not None
    await services.insight.insights.dismiss_gap(gap_id)
    return {"id": gap_id, "dismissed": True}


@export_router.get("/api/conversations/export", response_class=StreamingResponse,
                   responses={200: {"content": {m: {"schema": {"type": "string"}} for m in MEDIA.values()}}})
async def export(start: str = Query("", alias="from"), end: str = Query("", alias="to"),
                 format: Literal["jsonl", "csv"] = "jsonl",
                 services: Services = Depends(require_admin)) -> StreamingResponse:
    """Conversations whose newest message is in the range (UTC days; default the last 7), newest first."""
    assert services.insight is not None
    query = InsightQuery.parse(start, end)
    log.info("conversation export %s..%s as %s (admin token)", query.first, query.last, format)
    name = f"conversations-{query.first}-{query.last}.{format}"
    return StreamingResponse(services.insight.exporter.stream(query.first, query.last, format),
                             media_type=MEDIA[format],
                             headers={"Content-Disposition": f'attachment; filename="{name}"'})

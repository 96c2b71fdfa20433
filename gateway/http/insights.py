"""``GET /api/insights`` (admin): feedback, outcomes, tokens and cost for a range, from the hourly
counters; ``POST /api/insights/gaps/{id}/dismiss`` drops a gap group from the list."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query

from gateway.http.auth import require_admin
from gateway.http.json_body import AdminRoute
from gateway.insight.report import InsightQuery
from gateway.services import Services

router = APIRouter(prefix="/api/insights", route_class=AdminRoute)


@router.get("")
async def insights(start: str = Query("", alias="from"), end: str = Query("", alias="to"),
                   agent: str | None = None, channel: str | None = None, connection: str | None = None,
                   services: Services = Depends(require_admin)) -> dict:
    assert services.insight is not None
    return await services.insight.insights.report(InsightQuery.parse(start, end, agent, channel, connection))


@router.post("/gaps/{gap_id}/dismiss")
async def dismiss_gap(gap_id: str, services: Services = Depends(require_admin)) -> dict:
    assert services.insight is not None
    await services.insight.insights.dismiss_gap(gap_id)
    return {"id": gap_id, "dismissed": True}

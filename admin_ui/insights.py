"""Insights: conversations, outcomes, ratings, cost and the unanswered questions for a range of days,
from the same ``GET /api/insights`` report; charts drawn server-side as SVG (no script, no CDN)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse, Response, StreamingResponse
from pydantic import ValidationError

from admin_ui.render import page
from admin_ui.security import PREFIX, Signed, admin_only, check_csrf, signed_in
from gateway.core.errors import InvalidInput
from gateway.core.outbound import shown
from gateway.core.settings import ModelPrice
from gateway.insight.report import InsightQuery
from gateway.insight.webhooks import EVENT_TYPES

log = logging.getLogger(__name__)
WEBHOOK_LOG_SHOWN = 10
STAMP = "%Y-%m-%d %H:%M:%S"
EXPORT_MEDIA = {"jsonl": "application/x-ndjson", "csv": "text/csv; charset=utf-8"}

router = APIRouter(prefix=PREFIX)
RANGES = {"today": 1, "7": 7, "30": 30}


@dataclass(frozen=True)
class Bars:
    """A bar chart in a 100 x 42 box: (x, height, label, value) per bar."""

    bars: list[tuple[float, float, str, int]]
    top: int
    width: float

    @classmethod
    def of(cls, values: list[tuple[str, int]]) -> Bars:
        top = max((v for _, v in values), default=0) or 1
        width = 100 / max(1, len(values))
        return cls([(round(i * width, 3), round(40 * v / top, 3), label, v) for i, (label, v) in enumerate(values)],
                   top, round(width * 0.8, 3))


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f} %" if whole else "—"


@router.get("/insights")
async def insights(request: Request, range: str = "7", agent: str = "", channel: str = "", connection: str = "",
                   signed: Signed = Depends(signed_in)) -> Response:
    return await insights_page(request, signed, range, agent, channel, connection,
                               done=request.query_params.get("done"))


async def insights_page(request: Request, signed: Signed, range: str = "7", agent: str = "", channel: str = "",
                        connection: str = "", status_code: int = 200, **extra) -> Response:
    """The screen; ``extra``: what a webhook form's answer adds (a new secret shown once, an error)."""
    services = signed.services
    assert services.insight is not None
    days = RANGES.get(range, 7)
    today = datetime.now(UTC).date()
    query = InsightQuery.parse((today - timedelta(days=days - 1)).isoformat(), today.isoformat(),
                               agent or None, channel or None, connection or None)
    report = await services.insight.insights.report(query)
    conversations = report["conversations"]
    rated = report["feedback"]["up"] + report["feedback"]["down"]
    figures = {
        "Conversations": str(conversations),
        "Resolved": f"{report['resolved']} ({_share(report['resolved'], conversations)})",
        "Handed off": f"{report['handed_off']} ({_share(report['handed_off'], conversations)})",
        "Unanswered": f"{report['unanswered']} ({_share(report['unanswered'], conversations)})",
        "Abandoned": f"{report['abandoned']} ({_share(report['abandoned'], conversations)})",
        "Rated 👍 / 👎": f"{report['feedback']['up']} / {report['feedback']['down']} "
                         f"({_share(report['feedback']['up'], rated)} 👍)",
        "Comments": str(report["feedback"]["comments"]),
        "CSAT (1-5)": (f"{report['csat']['average']:.2f} from {report['csat']['count']} answer"
                       f"{'' if report['csat']['count'] == 1 else 's'}" if report["csat"]["count"] else "no answers"),
        "Tokens (prompt / completion)": f"{report['tokens']['prompt']:,} / {report['tokens']['completion']:,}",
        "Cost": f"{report['cost']:.4f}",
    }
    webhooks = []
    if signed.is_admin:  # the webhooks' delivery logs and the price table: an admin's business
        for endpoint in sorted((await services.insight.webhooks.reload()).values(), key=lambda e: e.created_at):
            tried = await services.insight.webhooks.deliveries(endpoint.id, WEBHOOK_LOG_SHOWN)
            webhooks.append({"endpoint": endpoint, "url": shown(endpoint.url), "waiting": tried["waiting"],
                             "attempts": [{**a, "at": datetime.fromtimestamp(a["at"], UTC).strftime(STAMP)}
                                          for a in tried["attempts"]]})
        await services.insight.price_edits.reload()
    return page(request, "insights.html", signed, status_code, report=report, figures=figures, range=str(range),
                webhooks=webhooks, prices=services.insight.prices.rows() if signed.is_admin else [],
                export_from=query.first.isoformat(), export_to=query.last.isoformat(),
                ranges=RANGES, filters={"agent": agent, "channel": channel, "connection": connection},
                per_day=Bars.of([(d["day"], d["conversations"]) for d in report["by_day"]]),
                per_hour=Bars.of([(f"{h:02d}:00", n) for h, n in enumerate(report["busiest_hours"])]),
                event_types=EVENT_TYPES, **extra)


@router.get("/insights/export", response_class=StreamingResponse,
            responses={200: {"content": {m: {"schema": {"type": "string"}} for m in EXPORT_MEDIA.values()}}})
async def export(start: str = Query("", alias="from"), end: str = Query("", alias="to"),
                 format: Literal["jsonl", "csv"] = "csv", signed: Signed = Depends(admin_only)) -> Response:
    """The export button: ``GET /api/conversations/export`` for a signed-in admin."""
    assert signed.services.insight is not None
    query = InsightQuery.parse(start, end)
    log.info("conversation export %s..%s as %s (console, %s)", query.first, query.last, format,
             signed.operator.username)
    name = f"conversations-{query.first}-{query.last}.{format}"
    return StreamingResponse(signed.services.insight.exporter.stream(query.first, query.last, format),
                             media_type=EXPORT_MEDIA[format],
                             headers={"Content-Disposition": f'attachment; filename="{name}"'})


@router.post("/insights/prices")
async def set_price(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    assert signed.services.insight is not None
    try:
        price = ModelPrice(input=str(form.get("input", "")), output=str(form.get("output", "")))
    except ValidationError as exc:
        raise InvalidInput("prices: input and output are numbers of at least 0 (per million tokens)") from exc
    await signed.services.insight.price_edits.set(str(form.get("model", "")), price)
    return RedirectResponse(f"{PREFIX}/insights#prices-h", status_code=303)


@router.post("/insights/prices/remove")
async def remove_price(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    assert signed.services.insight is not None
    await signed.services.insight.price_edits.remove(str(form.get("model", "")))
    return RedirectResponse(f"{PREFIX}/insights#prices-h", status_code=303)


@router.post("/insights/gaps/{gap_id}/dismiss")
async def dismiss_gap(gap_id: str, request: Request, signed: Signed = Depends(signed_in)) -> Response:
    await check_csrf(request, signed)
    assert signed.services.insight is not None
    await signed.services.insight.insights.dismiss_gap(gap_id)
    return RedirectResponse(f"{PREFIX}/insights", status_code=303)

"""Insights: conversations, outcomes, ratings, cost and the unanswered questions for a range of days,
from the same ``GET /api/insights`` report; charts drawn server-side as SVG (no script, no CDN)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from admin_ui.render import page
from admin_ui.security import PREFIX, Signed, check_csrf, signed_in
from gateway.insight.report import InsightQuery

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
    return page(request, "insights.html", signed, report=report, figures=figures, range=str(range),
                ranges=RANGES, filters={"agent": agent, "channel": channel, "connection": connection},
                per_day=Bars.of([(d["day"], d["conversations"]) for d in report["by_day"]]),
                per_hour=Bars.of([(f"{h:02d}:00", n) for h, n in enumerate(report["busiest_hours"])]))


@router.post("/insights/gaps/{gap_id}/dismiss")
async def dismiss_gap(gap_id: str, request: Request, signed: Signed = Depends(signed_in)) -> Response:
    await check_csrf(request, signed)
    assert signed.services.insight is not None
    await signed.services.insight.insights.dismiss_gap(gap_id)
    return RedirectResponse(f"{PREFIX}/insights", status_code=303)

"""The overview: is everything up, which channels are set up (with the URL to paste into each
vendor's console), and the counters an operator watches."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from admin_ui.render import page
from admin_ui.security import PREFIX, Signed, signed_in
from gateway.services import Services

router = APIRouter(prefix=PREFIX)


@dataclass(frozen=True)
class ChannelRow:
    name: str
    configured: bool
    url: str
    where: str


def _channels(services: Services) -> list[ChannelRow]:
    s = services.settings
    base = s.public_url.rstrip("/")
    return [
        ChannelRow("Web chat", True, f"{base}/chat", "link to it, or embed /widget.js"),
        ChannelRow("Telegram", s.telegram_bot_token is not None, f"{base}/channels/telegram/webhook",
                   "setWebhook (or SWITCHBOARD_TELEGRAM_REGISTER_WEBHOOK=true)"),
        ChannelRow("Slack", s.slack_bot_token is not None, f"{base}/channels/slack/events",
                   "Event Subscriptions → Request URL"),
        ChannelRow("Twilio SMS", s.twilio_account_sid is not None, f"{base}/channels/twilio/sms",
                   "phone number → Messaging → A message comes in"),
        ChannelRow("Twilio voice", s.twilio_account_sid is not None, f"{base}/channels/twilio/voice",
                   "phone number → Voice → A call comes in"),
    ]


async def _status(services: Services) -> dict[str, str]:
    checks = {"Redis": services.redis.ping, **{name.capitalize(): c for name, c in services.readiness.items()}}
    results = {}
    for name, check in checks.items():
        try:
            await asyncio.wait_for(check(), timeout=2.0)
            results[name] = "up"
        except Exception as exc:  # the overview says what is down and why, and stays usable
            results[name] = f"down: {type(exc).__name__}"
    results["Language model"] = "configured" if services.settings.llm_configured else "not configured (offline answers)"
    return results


def _counter(services: Services, name: str) -> float:
    return sum(
        sample.value for metric in services.metrics.registry.collect() if metric.name == name
        for sample in metric.samples if sample.name.endswith("_total")
    )


@dataclass(frozen=True)
class LastHour:
    turns: int
    per_minute: list[int]  # oldest minute first, 60 of them
    p50_ms: float | None
    p99_ms: float | None
    llm_errors: int
    delivery_failures: int
    handoffs: int

    @property
    def bars(self) -> list[tuple[int, int, int]]:
        """(x, height, count) of each minute's bar in a 60 x 40 chart."""
        top = max(self.per_minute) or 1
        return [(i, round(40 * n / top), n) for i, n in enumerate(self.per_minute)]


async def _last_hour(services: Services) -> LastHour | None:
    try:
        rows = await services.store.recent_turns()
    except Exception:  # Redis down: the status block says so
        return None
    now = time.time()
    recent = [r for r in rows if r[0] >= now - 3600]
    per_minute = [0] * 60
    for at, *_ in recent:
        per_minute[min(59, int((at - (now - 3600)) // 60))] += 1
    times = sorted(ms for _, ms, responder, _ in recent if responder != "handoff")
    return LastHour(
        turns=len(recent), per_minute=per_minute,
        p50_ms=times[int(0.5 * (len(times) - 1))] if times else None,
        p99_ms=times[int(0.99 * (len(times) - 1))] if times else None,
        llm_errors=sum(responder == "fallback" for _, _, responder, _ in recent),
        delivery_failures=sum(failed for *_, failed in recent),
        handoffs=sum(responder == "handoff" for _, _, responder, _ in recent),
    )


@router.get("")
async def overview(request: Request, signed: Signed = Depends(signed_in)) -> Response:
    services = signed.services
    counters = {
        "Turns since start": _counter(services, "switchboard_turns"),
        "LLM errors": _counter(services, "switchboard_llm_errors"),
        "Delivery failures": _counter(services, "switchboard_delivery_failures"),
        "Dead letters": _counter(services, "switchboard_inbox_dead"),
    }
    depths = {}
    for name, queue in services.queues.items():
        try:
            depths[name] = await asyncio.to_thread(lambda q=queue: q.count)
        except Exception:  # Redis down: the status block says so
            depths[name] = None
    return page(request, "overview.html", signed, status=await _status(services), channels=_channels(services),
                counters=counters, depths=depths, hour=await _last_hour(services))

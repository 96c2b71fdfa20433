"""The overview: is everything up, which channels are set up (with the URL to paste into each
vendor's console), and the counters an operator watches."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from admin_ui.public_url import GUIDE, reachable_by_vendors
from admin_ui.render import page
from admin_ui.security import PREFIX, Signed, check_csrf, signed_in
from gateway.core.errors import GatewayError
from gateway.core.models import PromptMessage
from gateway.services import Services
from gateway.turn.llm import CallOptions

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


async def _test_llm(services: Services) -> tuple[bool, str]:
    """One tiny completion through the same client the turns use: does the model answer, and how fast."""
    if services.llm is None:
        return False, "not configured: set SWITCHBOARD_LLM_API_KEY (or SWITCHBOARD_LLM_BASE_URL for a local server)"
    started = time.perf_counter()
    try:
        await asyncio.wait_for(
            services.llm.complete([PromptMessage(role="user", content="Reply with the word OK.")],
                                  CallOptions(max_tokens=5, max_retries=0)),
            timeout=services.settings.llm_timeout_s + 1)
    except (GatewayError, TimeoutError) as exc:
        return False, f"failed: {getattr(exc, 'message', None) or 'no answer within the timeout'}"
    ms = (time.perf_counter() - started) * 1000
    return True, f"{services.llm.model} at {services.settings.llm_base_url} answered in {ms:.0f} ms"


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
    def top(self) -> int:
        """The y axis' highest value: the busiest minute's turns."""
        return max(max(self.per_minute), 1)

    @property
    def bars(self) -> list[tuple[int, int, int]]:
        """(x, height, count) of each minute's bar in a 60 x 40 chart."""
        return [(i, round(40 * n / self.top), n) for i, n in enumerate(self.per_minute)]


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
    return await _overview(request, signed)


@router.post("/llm-test")
async def llm_test(request: Request, signed: Signed = Depends(signed_in)) -> Response:
    """"Test connection": a live call to the language model, its outcome shown on the overview."""
    await check_csrf(request, signed)
    ok, text = await _test_llm(signed.services)
    return await _overview(request, signed, llm_test={"ok": ok, "text": text})


async def _overview(request: Request, signed: Signed, llm_test: dict | None = None) -> Response:
    services = signed.services
    counters = {
        "Turns answered by this process": _counter(services, "switchboard_turns"),
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
                counters=counters, depths=depths, hour=await _last_hour(services), llm_test=llm_test,
                local_url=None if reachable_by_vendors(services.settings.public_url) else services.settings.public_url,
                guide=GUIDE)

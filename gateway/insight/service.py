"""The insight services, built once per app from the store and settings."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import Request

from gateway.conversation.store import RedisStore
from gateway.core.metrics import Metrics
from gateway.core.outbound import OutboundPolicy
from gateway.core.settings import Settings
from gateway.insight.counters import DailyCounters
from gateway.insight.csat import Csat
from gateway.insight.export import Exporter
from gateway.insight.feedback import Feedback, Voter
from gateway.insight.outcomes import Outcomes
from gateway.insight.price_edits import PriceEdits
from gateway.insight.prices import PriceTable
from gateway.insight.report import Insights
from gateway.insight.usage import ModelUsage
from gateway.insight.webhooks import Sealer, Webhooks

__all__ = ["Insight", "VisitorCheck"]

# A channel's way to recognise its own visitor on the feedback route (the web chat: its session header
# and token); None: not this channel's visitor. It raises for a visitor it refuses (wrong token, rate limit).
VisitorCheck = Callable[[Request], Awaitable[Voter | None]]


@dataclass
class Insight:
    counters: DailyCounters
    prices: PriceTable
    outcomes: Outcomes
    feedback: Feedback
    insights: Insights
    exporter: Exporter
    csat: Csat
    webhooks: Webhooks
    price_edits: PriceEdits
    usage: ModelUsage  # model calls made outside a turn's task

    @classmethod
    def build(cls, settings: Settings, store: RedisStore, metrics: Metrics, box: Sealer | None = None,
              policy: OutboundPolicy | None = None) -> Insight:
        counters = DailyCounters(store, settings.insight_retention_days)
        prices = PriceTable(settings.model_prices)
        webhooks = Webhooks(store, box, policy or OutboundPolicy.parse(settings.outbound_allow_hosts))
        feedback = Feedback(store, counters, metrics, settings.feedback_comment_max_chars, webhooks)
        outcomes = Outcomes(settings, store, counters, prices, metrics, webhooks)
        return cls(counters, prices, outcomes, feedback, Insights(store, counters, feedback),
                   Exporter(store, outcomes, feedback, prices), Csat(settings, store, counters), webhooks,
                   PriceEdits(store, prices), ModelUsage(counters, prices, metrics))

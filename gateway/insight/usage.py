"""Model calls made outside a turn's task (the voice channel's retrieval job, which runs on an RQ worker),
counted into the same daily counters and Prometheus counters as a turn's, at the (agent, channel,
connection) they were made for."""

from __future__ import annotations

import logging

from gateway.core.metrics import Metrics
from gateway.core.models import ModelCallTrace, utcnow
from gateway.insight.counters import DailyCounters, Dims
from gateway.insight.prices import PriceTable
from gateway.insight.trace_cost import TraceCost, turn_cost

__all__ = ["ModelUsage", "meter"]

log = logging.getLogger(__name__)


def meter(metrics: Metrics, dims: Dims, prompt: int, completion: int, cost_nano: int) -> None:
    """Tokens and cost on ``/metrics``, by agent and channel."""
    if not (prompt or completion):
        return
    labels = (dims.agent, dims.channel)
    metrics.insight_tokens.labels(*labels, "prompt").inc(prompt)
    metrics.insight_tokens.labels(*labels, "completion").inc(completion)
    metrics.insight_cost.labels(*labels).inc(cost_nano / 1e9)


class ModelUsage:
    def __init__(self, counters: DailyCounters, prices: PriceTable, metrics: Metrics) -> None:
        self.counters = counters
        self.prices = prices
        self.metrics = metrics

    async def record(self, agent: str | None, channel: str | None, connection: str | None,
                     calls: list[ModelCallTrace]) -> None:
        """Count ``calls``' tokens and cost (each priced by its model). Never raises: the work they were made
        for is not failed by its bookkeeping (what could not be counted is logged)."""
        prompt, completion, cost, unpriced = turn_cost(TraceCost(model_calls=calls), self.prices)
        if not (prompt or completion):
            return
        dims = Dims.of(agent, channel, connection)
        try:
            await self.counters.add(utcnow(), dims, {"prompt": prompt, "completion": completion, "cost_nano": cost,
                                                     "unpriced": unpriced})
        except Exception:
            log.exception("insight: %d model calls at %s not counted", len(calls), dims.suffix)
            return
        meter(self.metrics, dims, prompt, completion, cost)

"""What a turn's (or a job's) model calls cost: their tokens, each call priced by its own model."""

from __future__ import annotations

from pydantic import BaseModel, Field

from gateway.core.models import ModelCallTrace, TokenUsage, TurnTrace
from gateway.insight.prices import PriceTable

__all__ = ["TraceCost", "turn_cost"]


def turn_cost(trace: TurnTrace | TraceCost, prices: PriceTable) -> tuple[int, int, int, int]:
    """A turn's prompt and completion tokens, cost (billionths) and unpriced tokens: its reply's call and its
    other model calls (selection, rewrite, checks), each priced by its own model."""
    calls = [(c.model, c.prompt_tokens, c.completion_tokens) for c in trace.model_calls]
    if trace.usage is not None:
        calls.append((trace.model, trace.usage.prompt_tokens, trace.usage.completion_tokens))
    prompt = completion = cost = unpriced = 0
    for model, p, c in calls:
        prompt, completion = prompt + p, completion + c
        if p or c:
            priced = prices.cost_nano(model, p, c)
            cost, unpriced = (cost + priced, unpriced) if priced is not None else (cost, unpriced + p + c)
    return prompt, completion, cost, unpriced


class TraceCost(BaseModel):
    """What pricing needs of a stored turn trace (the export reads only this much of it)."""

    model: str | None = None
    usage: TokenUsage | None = None
    model_calls: list[ModelCallTrace] = Field(default_factory=list)

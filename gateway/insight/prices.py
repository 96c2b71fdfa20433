"""What a model call costs: tokens priced by a table of models (per million tokens), the built-in
defaults below overridden and extended by ``SWITCHBOARD_MODEL_PRICES``."""

from __future__ import annotations

from collections.abc import Mapping

from gateway.core.settings import ModelPrice

__all__ = ["DEFAULT_PRICES", "NANO", "PriceTable"]

NANO = 1_000_000_000  # costs are counted in billionths of the currency unit, so sums stay exact integers

# Public list prices (USD per million tokens) of a few common models, as of late 2025; the operator's
# table wins for any model it names.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "gpt-4o-mini": ModelPrice(input=0.15, output=0.60),
    "gpt-4o": ModelPrice(input=2.50, output=10.00),
    "gpt-4.1": ModelPrice(input=2.00, output=8.00),
    "gpt-4.1-mini": ModelPrice(input=0.40, output=1.60),
    "gpt-4.1-nano": ModelPrice(input=0.10, output=0.40),
    "gpt-3.5-turbo": ModelPrice(input=0.50, output=1.50),
    "o3-mini": ModelPrice(input=1.10, output=4.40),
    "o4-mini": ModelPrice(input=1.10, output=4.40),
    "claude-3-5-haiku": ModelPrice(input=0.80, output=4.00),
    "claude-3-5-sonnet": ModelPrice(input=3.00, output=15.00),
    "text-embedding-3-small": ModelPrice(input=0.02, output=0.0),
    "text-embedding-3-large": ModelPrice(input=0.13, output=0.0),
}


class PriceTable:
    """Built-in prices, under ``SWITCHBOARD_MODEL_PRICES``, under the operator's edits (console or API)."""

    def __init__(self, overrides: Mapping[str, ModelPrice] | None = None) -> None:
        self.overrides = dict(overrides or {})
        self.edited: dict[str, ModelPrice] = {}
        self._rebuild()

    def use_edited(self, edited: Mapping[str, ModelPrice]) -> None:
        self.edited = dict(edited)
        self._rebuild()

    def _rebuild(self) -> None:
        self.prices: dict[str, ModelPrice] = {**DEFAULT_PRICES, **self.overrides, **self.edited}
        # Longest names first: "gpt-4o-mini-2024-07-18" is priced as gpt-4o-mini, not as gpt-4o.
        self._prefixes = sorted(self.prices, key=len, reverse=True)

    def rows(self) -> list[dict]:
        """The table as the API and console show it, each price with where it comes from."""
        def source(model: str) -> str:
            return "edited" if model in self.edited else "environment" if model in self.overrides else "built-in"

        return [{"model": model, "input": price.input, "output": price.output, "source": source(model)}
                for model, price in sorted(self.prices.items())]

    def price(self, model: str | None) -> ModelPrice | None:
        if not model:
            return None
        found = self.prices.get(model)
        if found is not None:
            return found
        bare = model.rpartition("/")[2]  # "openai/gpt-4o-mini" as a router names it
        return next((self.prices[name] for name in self._prefixes if bare.startswith(name)), None)

    def cost_nano(self, model: str | None, prompt_tokens: int, completion_tokens: int) -> int | None:
        """The call's cost in billionths of a unit; None when the model is not in the table."""
        price = self.price(model)
        if price is None:
            return None
        # per million tokens -> per token in billionths: x 1000
        return round(prompt_tokens * price.input * 1000 + completion_tokens * price.output * 1000)

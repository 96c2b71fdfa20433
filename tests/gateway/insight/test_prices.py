"""The price table: the built-in prices, the operator's over them, and matching a model by its name."""

from __future__ import annotations

from gateway.core.settings import ModelPrice
from gateway.insight.prices import DEFAULT_PRICES, PriceTable


def test_a_dated_or_routed_model_name_is_priced_as_the_longest_listed_name_it_starts_with():
    table = PriceTable()
    assert table.price("gpt-4o-mini-2024-07-18") == DEFAULT_PRICES["gpt-4o-mini"]
    assert table.price("openai/gpt-4o") == DEFAULT_PRICES["gpt-4o"]
    assert table.price("llama3:8b") is None and table.cost_nano("llama3:8b", 100, 10) is None


def test_the_operators_prices_win_and_cost_is_exact_in_billionths():
    table = PriceTable({"gpt-4o-mini": ModelPrice(input=1.0, output=3.0), "local": ModelPrice(input=0, output=0)})
    # 1,234 prompt tokens at 1.0 per million + 567 completion tokens at 3.0 per million
    assert table.cost_nano("gpt-4o-mini", 1234, 567) == 1234 * 1000 + 567 * 3000
    assert table.cost_nano("local", 10_000, 10_000) == 0
    assert table.price("gpt-4o") == DEFAULT_PRICES["gpt-4o"]


def test_a_bad_price_table_is_refused_with_the_model_named(monkeypatch):
    import pytest
    from pydantic import ValidationError

    from gateway.core.settings import Settings

    monkeypatch.setenv("SWITCHBOARD_MODEL_PRICES", '{"gpt-x": {"input": -1, "output": 2}}')
    with pytest.raises(ValidationError, match="gpt-x"):
        Settings(_env_file=None)
    monkeypatch.setenv("SWITCHBOARD_MODEL_PRICES", '{"gpt-x": {"in": 1, "output": 2}}')
    with pytest.raises(ValidationError, match="gpt-x"):
        Settings(_env_file=None)
    monkeypatch.setenv("SWITCHBOARD_MODEL_PRICES", '{"gpt-x": {"input": 0.5, "output": 2}}')
    assert Settings(_env_file=None).model_prices["gpt-x"] == ModelPrice(input=0.5, output=2)

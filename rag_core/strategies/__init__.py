"""The strategy registry. Adding a strategy = one module here + one line in ``STRATEGIES``."""

from __future__ import annotations

from collections.abc import Callable

from rag_core.errors import UnknownStrategy
from rag_core.retrieval import RetrievalStrategy, StrategyContext
from rag_core.strategies.bm25 import Bm25Strategy
from rag_core.strategies.dense import DenseStrategy
from rag_core.strategies.hybrid import HybridStrategy
from rag_core.strategies.hybrid_llm import HybridLlmStrategy
from rag_core.strategies.llm_select import LlmSelectStrategy

StrategyFactory = Callable[[StrategyContext], RetrievalStrategy]

STRATEGIES: dict[str, StrategyFactory] = {
    "bm25": Bm25Strategy.from_context,
    "dense": DenseStrategy.from_context,
    "hybrid": HybridStrategy.from_context,
    "llm_select": LlmSelectStrategy.from_context,
    "hybrid_llm": HybridLlmStrategy.from_context,
}
LLM_STRATEGIES = frozenset({"llm_select", "hybrid_llm"})
DEFAULT_STRATEGY = "hybrid"


def build_strategy(name: str, context: StrategyContext) -> RetrievalStrategy:
    try:
        factory = STRATEGIES[name]
    except KeyError:
        known = ", ".join(sorted(STRATEGIES))
        raise UnknownStrategy(f"unknown retrieval strategy {name!r} (known: {known})") from None
    return factory(context)


def build_strategies(context: StrategyContext) -> dict[str, RetrievalStrategy]:
    return {name: factory(context) for name, factory in STRATEGIES.items()}


__all__ = [
    "DEFAULT_STRATEGY",
    "LLM_STRATEGIES",
    "STRATEGIES",
    "Bm25Strategy",
    "DenseStrategy",
    "HybridLlmStrategy",
    "HybridStrategy",
    "LlmSelectStrategy",
    "StrategyFactory",
    "build_strategies",
    "build_strategy",
]

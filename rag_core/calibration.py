"""What a result's ``score`` means: one number in 0-1 per strategy, comparable across queries.

- With a reranker: the reranker's relevance probability (a sigmoid of its logit where it answers logits).
- Otherwise: the estimated chance that the result answers the query, from a logistic curve over the raw
  score of the leg that ranked it — ``fused`` for hybrid (0.2 x BM25 / best BM25 + 0.8 x cosine), the
  cosine for dense, log(1 + BM25) for bm25 — fitted on the OR-ShARC and StackFAQ dev splits' top-10
  results (``python bench/calibrate.py`` prints the fit and its reliability table).

A relevance threshold of 0.5 therefore keeps results judged more likely right than wrong. The curves are
monotone, so calibration never reorders a strategy's ranking.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

FEATURES: dict[str, Callable[[float], float]] = {
    "fused": float,
    "dense": float,
    "bm25": lambda raw: math.log1p(max(raw, 0.0)),
}
# (slope, intercept) as printed by bench/calibrate.py on 2026-11-23 (all-MiniLM-L6-v2, fp32 documents, int8
# queries as shipped; 19.5k top-10 results each).
# Reliability there: fused and dense within 0.02 of the observed rate in every 0.2 bucket; bm25 under-states
# its rare high scores (predicted 0.47-0.64 where 0.70-0.95 were right).
COEFFICIENTS: dict[str, tuple[float, float]] = {
    "fused": (17.3053, -12.2562),
    "dense": (14.6495, -10.1194),
    "bm25": (1.9318, -7.2775),
}
ORDER = ("rerank", "fused", "dense", "bm25")  # the leg that decides, when a result carries several


def logistic(x: float) -> float:
    if x < -60:
        return 0.0
    return 1.0 / (1.0 + math.exp(-x))


def calibrated_score(legs: Mapping[str, float]) -> float:
    """0-1 for a result with these raw leg scores; 0 when no known leg scored it."""
    for leg in ORDER:
        if leg in legs:
            if leg == "rerank":
                return round(min(max(legs[leg], 0.0), 1.0), 6)
            a, b = COEFFICIENTS[leg]
            return round(logistic(a * FEATURES[leg](legs[leg]) + b), 6)
    return 0.0

"""Maximal marginal relevance (seed 004): pick results one at a time, each maximising
``lambda * relevance - (1 - lambda) * (its highest cosine to a result already picked)``, so a knowledge
base with overlapping topics answers with several different ones instead of near-copies of the best."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from rag_core.retrieval import Hit


def mmr_select(
    hits: Sequence[Hit], vectors: Mapping[str, Sequence[float]], query: Sequence[float], k: int, lam: float
) -> list[Hit]:
    """``k`` of ``hits`` in MMR order. Similarity is the cosine of the dense vectors; relevance is on the
    same scale: the hybrid fused score (mostly cosine) where there is one, else the cosine to ``query``, else
    the calibrated score. A hit without a vector counts as unlike every other."""
    pool = list(hits)
    if len(pool) <= 1 or k <= 0:
        return pool[:k]
    dim = len(next(iter(vectors.values()))) if vectors else 0
    matrix = np.zeros((len(pool), dim), dtype=np.float32)
    known = np.zeros(len(pool), dtype=bool)
    for i, hit in enumerate(pool):
        vector = vectors.get(hit.topic.source)
        if vector is not None and dim:
            v = np.asarray(vector, dtype=np.float32)
            matrix[i] = v / max(float(np.linalg.norm(v)), 1e-12)
            known[i] = True
    similarity = matrix @ matrix.T
    q = np.asarray(query, dtype=np.float32)
    q /= max(float(np.linalg.norm(q)), 1e-12)
    # Relevance on the cosine scale: the fused score where there is one (its ranking), else the cosine.
    fused = np.asarray([hit.legs.get("fused", np.nan) for hit in pool], dtype=np.float32)
    relevance = np.where(~np.isnan(fused), fused,
                         np.where(known, matrix @ q, np.asarray([hit.score for hit in pool], dtype=np.float32)))
    chosen: list[int] = []
    closest = np.zeros(len(pool), dtype=np.float32)  # highest similarity to anything chosen so far
    remaining = list(range(len(pool)))
    while remaining and len(chosen) < k:
        values = [lam * relevance[i] - (1 - lam) * closest[i] for i in remaining]
        best = remaining[int(np.argmax(values))]
        chosen.append(best)
        remaining.remove(best)
        if known[best]:
            closest = np.maximum(closest, np.where(known, similarity[best], 0.0))
    return [pool[i] for i in chosen]

"""BM25-style sparse vectors. Documents carry saturated, length-normalised term frequencies;
the collection's ``Modifier.IDF`` multiplies in the idf at query time, so together they score
exactly Lucene BM25 (idf = ln(1 + (N - df + 0.5) / (df + 0.5)))."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from qdrant_client import models

from rag_core.tokenizer import term_counts, term_id


@dataclass(frozen=True)
class SparseEncoder:
    k1: float = 1.2
    b: float = 0.75
    # Length normalisation is relative to a fixed average so that adding topics never forces a
    # re-index; it only rescales k1 for collections whose real average differs.
    avg_doc_terms: float = 60.0

    @property
    def signature(self) -> str:
        return f"bm25:k1={self.k1}:b={self.b}:avg={self.avg_doc_terms}"

    def encode_document(self, text: str) -> models.SparseVector:
        counts = term_counts(text)
        length = sum(counts.values())
        norm = self.k1 * (1.0 - self.b + self.b * length / self.avg_doc_terms)
        weights = {term: tf * (self.k1 + 1.0) / (tf + norm) for term, tf in counts.items()}
        return _to_vector(weights)

    def encode_query(self, weighted_texts: Sequence[tuple[str, float]]) -> models.SparseVector:
        """Each distinct term of each text counts once, scaled by that text's weight."""
        weights: Counter[str] = Counter()
        for text, weight in weighted_texts:
            for term in term_counts(text):
                weights[term] += weight
        return _to_vector(dict(weights))


def _to_vector(weights: Mapping[str, float]) -> models.SparseVector:
    merged: dict[int, float] = {}
    for term, weight in weights.items():
        if weight > 0:
            index = term_id(term)
            merged[index] = merged.get(index, 0.0) + weight
    indices = sorted(merged)
    return models.SparseVector(indices=indices, values=[merged[i] for i in indices])

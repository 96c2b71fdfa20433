"""An in-process snapshot of the retrieval pool for qdrant-client *local* mode.

Local mode scores sparse vectors in pure Python (tens of milliseconds per query at a few
hundred topics). Since a local-mode collection has exactly one writer — the knowledge base
in this process — a snapshot invalidated on each of its writes is always current. It scores
exactly as Qdrant does: dot product of the query with stored weights, query weights scaled
by idf = ln(1 + (N - df + 0.5) / (df + 0.5)) over the points that carry the sparse vector,
and cosine on normalised dense vectors. Against a Qdrant server it is not used."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from qdrant_client import models

from rag_core.topic import ScoredTopic, Topic


class PoolIndex:
    def __init__(
        self,
        topics: Sequence[Topic],
        sparse: Sequence[models.SparseVector | None],
        dense: Sequence[Sequence[float] | None],
    ) -> None:
        self.topics = list(topics)
        self.by_source = {topic.source: topic for topic in self.topics}
        postings: dict[int, tuple[list[int], list[float]]] = {}
        self._sparse_docs = 0
        for row, vector in enumerate(sparse):
            if vector is None:
                continue
            self._sparse_docs += 1
            for index, value in zip(vector.indices, vector.values, strict=True):
                docs, weights = postings.setdefault(index, ([], []))
                docs.append(row)
                weights.append(value)
        self._postings = {
            index: (np.asarray(docs, dtype=np.int32), np.asarray(weights, dtype=np.float32))
            for index, (docs, weights) in postings.items()
        }
        self._dense_rows = np.asarray([i for i, v in enumerate(dense) if v is not None], dtype=np.int32)
        matrix = np.asarray([v for v in dense if v is not None], dtype=np.float32)
        if len(matrix):
            matrix /= np.linalg.norm(matrix, axis=1, keepdims=True).clip(min=1e-12)
        self._dense = matrix
        self._dense_row_of = {self.topics[int(row)].source: i for i, row in enumerate(self._dense_rows)}

    def search_sparse(self, query: models.SparseVector, k: int) -> list[ScoredTopic]:
        scores = np.zeros(len(self.topics), dtype=np.float32)
        touched = np.zeros(len(self.topics), dtype=bool)
        n = self._sparse_docs
        for index, value in zip(query.indices, query.values, strict=True):
            posting = self._postings.get(index)
            if posting is None:
                continue
            docs, weights = posting
            idf = math.log((n - len(docs) + 0.5) / (len(docs) + 0.5) + 1.0)
            scores[docs] += value * idf * weights
            touched[docs] = True
        rows = np.nonzero(touched)[0]
        return self._top(rows, scores[rows], k)

    def search_dense(self, vector: Sequence[float], k: int) -> list[ScoredTopic]:
        if not len(self._dense):
            return []
        query = np.asarray(vector, dtype=np.float32)
        query /= max(float(np.linalg.norm(query)), 1e-12)
        return self._top(self._dense_rows, self._dense @ query, k)

    def dense_vectors(self, sources: Sequence[str]) -> dict[str, list[float]]:
        return {s: self._dense[self._dense_row_of[s]].tolist() for s in sources if s in self._dense_row_of}

    def _top(self, rows: np.ndarray, scores: np.ndarray, k: int) -> list[ScoredTopic]:
        if not len(rows):
            return []
        order = np.argsort(-scores, kind="stable")[:k]
        return [ScoredTopic(topic=self.topics[int(rows[i])], score=float(scores[i])) for i in order]

"""Several knowledge bases searched as one: each leg asks every member and keeps the best
``k`` by score (dense cosine scores share one embedding model; BM25 scores share one formula),
so every retrieval strategy works over a group unchanged."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from rag_core.knowledge_base import KnowledgeBase
from rag_core.topic import ScoredTopic, Topic


class KnowledgeBaseGroup:
    def __init__(self, members: Sequence[KnowledgeBase]) -> None:
        if not members:
            raise ValueError("a knowledge-base group needs at least one member")
        self.members = list(members)

    @property
    def dense_enabled(self) -> bool:
        return any(kb.dense_enabled for kb in self.members)

    @staticmethod
    def _best(groups: Sequence[Sequence[ScoredTopic]], k: int) -> list[ScoredTopic]:
        best: dict[str, ScoredTopic] = {}
        for hit in (hit for group in groups for hit in group):
            if hit.topic.source not in best or hit.score > best[hit.topic.source].score:
                best[hit.topic.source] = hit
        return sorted(best.values(), key=lambda h: (-h.score, h.topic.source))[:k]

    async def search_sparse(self, weighted_texts: Sequence[tuple[str, float]], k: int) -> list[ScoredTopic]:
        found = await asyncio.gather(*(kb.search_sparse(weighted_texts, k) for kb in self.members))
        return self._best(found, k)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]] | None:
        for kb in self.members:
            if kb.dense_enabled:
                return await kb.embed_queries(texts)
        return None

    async def dense_vectors(self, sources: Sequence[str]) -> dict[str, list[float]]:
        found = await asyncio.gather(*(kb.dense_vectors(sources) for kb in self.members))
        return {source: vector for group in found for source, vector in group.items()}

    async def search_dense(self, vector: Sequence[float], k: int) -> list[ScoredTopic]:
        found = await asyncio.gather(*(kb.search_dense(vector, k) for kb in self.members))
        return self._best(found, k)

    async def pool_is_empty(self) -> bool:
        return all(await asyncio.gather(*(kb.pool_is_empty() for kb in self.members)))

    async def rag_pool(self, limit: int = 300) -> list[Topic]:
        pools = await asyncio.gather(*(kb.rag_pool(limit) for kb in self.members))
        merged = {t.source: t for pool in pools for t in pool}
        return sorted(merged.values(), key=lambda t: (t.updated_at, t.source), reverse=True)[:limit]

    async def get_many(self, sources: Sequence[str]) -> list[Topic]:
        found = await asyncio.gather(*(kb.get_many(sources) for kb in self.members))
        by_source = {t.source: t for group in found for t in group}
        return [by_source[s] for s in dict.fromkeys(sources) if s in by_source]

    async def current(self, sources: Sequence[str]) -> list[Topic]:
        found = await asyncio.gather(*(kb.current(sources) for kb in self.members))
        by_source = {t.source: t for group in found for t in group}
        return [by_source[s] for s in dict.fromkeys(sources) if s in by_source]

    async def count(self, label: str | None = None) -> int:
        return sum(await asyncio.gather(*(kb.count(label) for kb in self.members)))

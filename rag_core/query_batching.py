"""Query embeddings of concurrent turns computed together: while one embedding call runs, the queries that
arrive wait and then go in one call (at most ``max_batch`` texts). A lone query never waits, so an idle
gateway answers as fast as before, and a loaded one spends one ONNX call on many turns instead of queueing
them one by one behind each other."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from rag_core.encoders import DenseEncoder, QueryWrapper


class BatchingQueries(QueryWrapper):
    def __init__(self, inner: DenseEncoder, max_batch: int = 32) -> None:
        super().__init__(inner)
        self.max_batch = max_batch
        self._waiting: list[tuple[list[str], asyncio.Future[list[list[float]]]]] = []
        self._running = False
        self.calls = 0  # embedding calls made (a test and the benchmarks read it)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        future: asyncio.Future[list[list[float]]] = asyncio.get_running_loop().create_future()
        self._waiting.append((list(texts), future))
        if not self._running:
            self._running = True
            asyncio.get_running_loop().create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch, size = [], 0
                while self._waiting and (not batch or size + len(self._waiting[0][0]) <= self.max_batch):
                    texts, future = self._waiting.pop(0)
                    batch.append((texts, future))
                    size += len(texts)
                unique = list(dict.fromkeys(t for texts, _ in batch for t in texts))
                self.calls += 1
                try:
                    vectors = dict(zip(unique, await self.inner.embed_queries(unique), strict=True))
                except Exception as exc:  # noqa: BLE001 - every waiting caller gets the encoder's own error
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for texts, future in batch:
                    if not future.done():
                        future.set_result([vectors[t] for t in texts])
        finally:
            self._running = False

"""A payload-only Qdrant collection of small typed records (the knowledge-base catalogue and the
document records), kept beside the topics so one store holds a knowledge base and what fed it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from qdrant_client import QdrantClient, models

from rag_core.errors import KnowledgeBaseUnavailable
from rag_core.qdrant_calls import QdrantCalls

_R = TypeVar("_R", bound=BaseModel)
_NAMESPACE = uuid.UUID("5d1c6f0e-4b8a-4a56-9a57-3f6f1bb7c2a1")


class RecordCollection(Generic[_R]):
    def __init__(
        self, client: QdrantClient, name: str, model: type[_R], key: Callable[[_R], str],
        indexed: tuple[str, ...] = (),
    ) -> None:
        self._calls = QdrantCalls(client)
        self._client = client
        self.name = name
        self._model = model
        self._key = key
        self._indexed = indexed
        self._ready = False
        self._ready_lock = asyncio.Lock()

    async def _ensure(self) -> None:
        if self._ready:
            return
        async with self._ready_lock:
            if not self._ready and not await self._calls.run(self._client.collection_exists, self.name):
                await self._create()
            self._ready = True

    async def _create(self) -> None:
        try:
            await self._calls.run(self._client.create_collection, self.name, vectors_config={})
        except KnowledgeBaseUnavailable:
            if not await self._calls.run(self._client.collection_exists, self.name):
                raise
            return  # another process created it first
        if not self._calls.local:
            for field in self._indexed:
                await self._calls.run(
                    self._client.create_payload_index, self.name, field, models.PayloadSchemaType.KEYWORD
                )

    @staticmethod
    def _point_id(key: str) -> str:
        return str(uuid.uuid5(_NAMESPACE, key))

    async def put(self, record: _R) -> _R:
        await self._ensure()
        point = models.PointStruct(
            id=self._point_id(self._key(record)), vector={}, payload=record.model_dump(mode="json")
        )
        await self._calls.run(self._client.upsert, self.name, points=[point])
        return record

    async def get(self, key: str) -> _R | None:
        await self._ensure()
        found = await self._calls.run(self._client.retrieve, self.name, ids=[self._point_id(key)], with_payload=True)
        return self._model.model_validate(found[0].payload) if found and found[0].payload else None

    async def delete(self, key: str) -> None:
        await self._ensure()
        await self._calls.run(
            self._client.delete, self.name, points_selector=models.PointIdsList(points=[self._point_id(key)])
        )

    async def find(self, **equals: Any) -> list[_R]:
        """Every record whose payload fields equal ``equals`` (all of them, when none given)."""
        await self._ensure()
        flt = models.Filter(must=[
            models.FieldCondition(key=k, match=models.MatchValue(value=v)) for k, v in equals.items()
        ]) if equals else None
        out: list[_R] = []
        offset: Any = None
        while True:
            records, offset = await self._calls.run(
                self._client.scroll, self.name, scroll_filter=flt, limit=256, offset=offset, with_payload=True
            )
            out.extend(self._model.model_validate(r.payload) for r in records if r.payload)
            if offset is None:
                return out

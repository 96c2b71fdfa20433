"""The named knowledge bases of an agent: name, description, chunking defaults, last sync.

``main`` always exists (it is the collection knowledge bases had before they had names)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from qdrant_client import QdrantClient

from rag_core.knowledge_base import MAIN_KB
from rag_core.records import RecordCollection

KB_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,47}$"


def _now() -> datetime:
    return datetime.now(UTC)


class KnowledgeBaseInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=KB_NAME_PATTERN)
    description: str = Field(default="", max_length=2000)
    chunking: dict[str, Any] = Field(default_factory=dict)  # ChunkingOptions fields; empty = the defaults
    created_at: datetime = Field(default_factory=_now)
    last_sync: datetime | None = None


class BaseCatalog:
    def __init__(self, client: QdrantClient, agent_id: str) -> None:
        self._records = RecordCollection(client, f"kbmeta_{agent_id}", KnowledgeBaseInfo, key=lambda r: r.name)

    async def all(self) -> list[KnowledgeBaseInfo]:
        """Every knowledge base, ``main`` first, the rest by name."""
        found = {info.name: info for info in await self._records.find()}
        main = found.pop(MAIN_KB, None) or KnowledgeBaseInfo(name=MAIN_KB, description="The default knowledge base")
        return [main, *sorted(found.values(), key=lambda info: info.name)]

    async def get(self, name: str) -> KnowledgeBaseInfo | None:
        found = await self._records.get(name)
        if found is None and name == MAIN_KB:
            return KnowledgeBaseInfo(name=MAIN_KB, description="The default knowledge base")
        return found

    async def put(self, info: KnowledgeBaseInfo) -> KnowledgeBaseInfo:
        return await self._records.put(info)

    async def delete(self, name: str) -> None:
        await self._records.delete(name)

    async def touch(self, name: str) -> None:
        """Record that ``name`` was just synchronised (a document ingested or removed)."""
        info = await self.get(name)
        if info is not None:
            await self.put(info.model_copy(update={"last_sync": _now()}))

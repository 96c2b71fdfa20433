"""An agent's named knowledge bases: one Qdrant collection each, one embedding model for all.

``main`` always exists; the others are created and deleted through the admin API or the CLI.
Which of them a turn searches is agent configuration (``SWITCHBOARD_RETRIEVAL_KBS``, default all)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from qdrant_client import QdrantClient

from gateway.core.errors import Conflict, InvalidInput, NotFound
from rag_core.base_catalog import BaseCatalog, KnowledgeBaseInfo
from rag_core.chunking import ChunkingOptions
from rag_core.document import DocumentStore
from rag_core.encoders import DenseEncoder
from rag_core.kb_group import KnowledgeBaseGroup
from rag_core.knowledge_base import MAIN_KB, KnowledgeBase
from rag_core.topic import RAG_CONTEXT_LABEL

NAMES_TTL_S = 5.0  # another replica's new knowledge base is seen within this long


class KnowledgeBaseDescription(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    chunking: ChunkingOptions
    topics: int
    retrieval_topics: int | None  # None when not counted (a labelled count scans every topic in local mode)
    documents: int
    documents_by_status: dict[str, int]
    embedding_model: str
    collection: str
    created_at: Any
    last_sync: Any


def chunking_options(data: dict[str, Any], defaults: ChunkingOptions) -> ChunkingOptions:
    try:
        return ChunkingOptions.model_validate({**defaults.model_dump(), **data})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(["chunking", *(str(p) for p in first["loc"])])
        raise InvalidInput(f"{where}: {first['msg'].removeprefix('Value error, ')}") from exc


class KnowledgeBases:
    def __init__(
        self, client: QdrantClient, agent_id: str, dense: DenseEncoder | None, *,
        chunking: ChunkingOptions, embedding_model: str, retrieval: tuple[str, ...] = (),
        on_write: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self._client = client
        self._on_write = on_write  # every base's writes report here (the semantic cache's write counter)
        self._agent_id = agent_id
        self._dense = dense
        self.default_chunking = chunking
        self.embedding_model = embedding_model
        self.retrieval = retrieval
        self.catalog = BaseCatalog(client, agent_id)
        self.documents = DocumentStore(client, agent_id)
        self._instances: dict[str, KnowledgeBase] = {}
        self._names: tuple[float, list[str]] | None = None


    @property
    def dense(self) -> DenseEncoder | None:
        """The embedding model every knowledge base uses (None: sparse only)."""
        return self._dense
    def instance(self, name: str) -> KnowledgeBase:
        """The knowledge base object for ``name`` (built once; existence is not checked)."""
        kb = self._instances.get(name)
        if kb is None:
            kb = self._instances[name] = KnowledgeBase(self._client, self._agent_id, name=name, dense=self._dense)
            kb.on_write = self._on_write
        return kb

    @property
    def main(self) -> KnowledgeBase:
        return self.instance(MAIN_KB)

    async def names(self) -> list[str]:
        cached = self._names
        if cached is not None and time.monotonic() - cached[0] < NAMES_TTL_S:
            return cached[1]
        names = [info.name for info in await self.catalog.all()]
        self._names = (time.monotonic(), names)
        return names

    async def info(self, name: str) -> KnowledgeBaseInfo:
        info = await self.catalog.get(name)
        if info is None:
            raise NotFound(f"no knowledge base named {name!r}")
        return info

    async def get(self, name: str) -> KnowledgeBase:
        await self.info(name)
        return self.instance(name)

    def chunking_for(self, info: KnowledgeBaseInfo, override: dict[str, Any] | None = None) -> ChunkingOptions:
        base = chunking_options(info.chunking, self.default_chunking)
        return chunking_options(override, base) if override else base

    async def create(
        self, name: str, description: str = "", chunking: dict[str, Any] | None = None
    ) -> KnowledgeBaseInfo:
        try:
            info = KnowledgeBaseInfo(name=name, description=description)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise InvalidInput(f"{first['loc'][0]}: {first['msg']}") from exc
        if name in await self._fresh_names():
            raise Conflict(f"a knowledge base named {name!r} already exists")
        options = chunking_options(chunking or {}, self.default_chunking)
        info = info.model_copy(update={"chunking": options.model_dump()})
        await self.instance(name).ensure_collection()
        await self.catalog.put(info)
        self._names = None
        return info

    async def update(
        self, name: str, *, description: str | None = None, chunking: dict[str, Any] | None = None
    ) -> KnowledgeBaseInfo:
        info = await self.info(name)
        changes: dict[str, Any] = {}
        if description is not None:
            if len(description) > 2000:
                raise InvalidInput("description: at most 2000 characters")
            changes["description"] = description
        if chunking is not None:
            changes["chunking"] = self.chunking_for(info, chunking).model_dump()
        return await self.catalog.put(info.model_copy(update=changes))

    async def delete(self, name: str) -> None:
        if name == MAIN_KB:
            raise Conflict("the main knowledge base cannot be deleted; delete its topics or documents instead")
        await self.info(name)
        await self.instance(name).drop()
        for record in await self.documents.in_kb(name):
            await self.documents.delete(record.id)
        await self.catalog.delete(name)
        self._instances.pop(name, None)
        self._names = None

    async def describe(self, name: str, *, count_retrieval: bool = True) -> KnowledgeBaseDescription:
        info = await self.info(name)
        kb = self.instance(name)
        records = await self.documents.in_kb(name)
        by_status: dict[str, int] = {}
        for record in records:
            by_status[record.status] = by_status.get(record.status, 0) + 1
        return KnowledgeBaseDescription(
            name=name, description=info.description, chunking=self.chunking_for(info),
            topics=await kb.count(),
            retrieval_topics=await kb.count(label=RAG_CONTEXT_LABEL) if count_retrieval else None,
            documents=len(records), documents_by_status=by_status,
            embedding_model=self.embedding_model if kb.dense_enabled else "none (sparse BM25 only)",
            collection=kb.collection_name, created_at=info.created_at, last_sync=info.last_sync,
        )

    async def _fresh_names(self) -> list[str]:
        self._names = None
        return await self.names()

    async def searched(self, requested: list[str] | None = None) -> list[str]:
        """The knowledge bases a search covers: ``requested``, else the agent's setting, else all."""
        known = await self.names()
        if requested:
            unknown = [n for n in requested if n not in known]
            if unknown:
                raise InvalidInput(f"kb: no knowledge base named {', '.join(map(repr, unknown))} (known: {known})")
            return list(dict.fromkeys(requested))
        # A configured name that does not exist (yet) is skipped rather than failing every turn.
        configured = [n for n in self.retrieval if n in known]
        return configured or known

    def group(self, names: list[str]) -> KnowledgeBase | KnowledgeBaseGroup:
        if len(names) == 1:
            return self.instance(names[0])
        return KnowledgeBaseGroup([self.instance(n) for n in names])

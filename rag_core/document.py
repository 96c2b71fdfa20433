"""A document that fed a knowledge base (an uploaded file, a file ingested from disk, a web page):
what it was, what became of it, and how its chunk topics are named."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from qdrant_client import QdrantClient

from rag_core.records import RecordCollection

DocumentStatus = Literal["processing", "ready", "failed"]
DocumentOrigin = Literal["upload", "path", "website"]


def _now() -> datetime:
    return datetime.now(UTC)


def document_id(kb: str, name: str) -> str:
    """Stable per knowledge base and name: the same file uploaded again is the same document."""
    return hashlib.sha256(f"{kb}\n{name}".encode()).hexdigest()[:16]


def document_label(doc_id: str) -> str:
    return f"document:{doc_id}"


def chunk_source(doc_id: str, number: int) -> str:
    return f"doc:{doc_id}#{number}"


class DocumentRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    kb: str
    name: str  # the file name (or path under an ingested directory, or the page URL)
    title: str = ""
    format: str = ""
    size: int = 0
    content_hash: str = ""  # of the bytes and of how they were turned into chunks
    status: DocumentStatus = "processing"
    chunk_count: int = 0
    embedded: int = 0  # chunks embedded by the last ingest (0 when nothing changed)
    error: str | None = None
    origin: DocumentOrigin = "upload"
    url: str | None = None
    labels: list[str] = Field(default_factory=list)  # extra labels on every chunk topic
    row_template: str | None = None  # CSV / JSON records: how a row became text
    warnings: list[str] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=_now)
    updated_at: datetime = Field(default_factory=_now)


class DocumentStore:
    def __init__(self, client: QdrantClient, agent_id: str) -> None:
        self._records = RecordCollection(
            client, f"kbdocs_{agent_id}", DocumentRecord, key=lambda r: r.id, indexed=("kb", "origin")
        )

    async def get(self, doc_id: str) -> DocumentRecord | None:
        return await self._records.get(doc_id)

    async def put(self, record: DocumentRecord) -> DocumentRecord:
        return await self._records.put(record.model_copy(update={"updated_at": _now()}))

    async def delete(self, doc_id: str) -> None:
        await self._records.delete(doc_id)

    async def in_status(self, status: DocumentStatus) -> list[DocumentRecord]:
        return await self._records.find(status=status)

    async def in_kb(self, kb: str, origin: DocumentOrigin | None = None) -> list[DocumentRecord]:
        """The knowledge base's documents, newest first."""
        found = await self._records.find(kb=kb, **({"origin": origin} if origin else {}))
        return sorted(found, key=lambda r: r.updated_at, reverse=True)

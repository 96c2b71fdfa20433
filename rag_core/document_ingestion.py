"""A document becomes chunk topics: extract → chunk → topics → upsert, exactly and incrementally.

- The same bytes ingested the same way again change nothing (the record's content hash).
- A changed document embeds only chunks whose text is new (a chunk that moved keeps its vectors)
  and deletes chunks that disappeared.
- A document that cannot be read is recorded as failed with the reason; its earlier chunks, if
  any, stay as they were. Extraction happens before anything is written.
- Ingests of one document run one at a time (``lock``), so two at once never interleave.
- Extraction and chunking run in a child process under a budget (``ExtractionSandbox``)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol
from weakref import WeakValueDictionary

from pydantic import BaseModel, ConfigDict

from rag_core.base_catalog import BaseCatalog
from rag_core.chunking import Chunk, ChunkingOptions, sentences
from rag_core.document import (
    DocumentOrigin,
    DocumentRecord,
    DocumentStore,
    chunk_source,
    document_id,
    document_label,
)
from rag_core.errors import ExtractionFailed, UnsupportedFormat
from rag_core.extract import ExtractedDocument, detect_format
from rag_core.extraction_sandbox import ExtractionSandbox
from rag_core.knowledge_base import KnowledgeBase
from rag_core.topic import RAG_CONTEXT_LABEL, Topic

# Bump when the way chunks become topics changes, so every document is re-shaped on its next ingest.
TOPIC_SHAPE = 2
MAX_TITLE_CHARS = 1000
STOPPED = "stopped before it finished (the request was cancelled or the gateway was stopping); upload it again"
LockFactory = Callable[[str], AbstractAsyncContextManager[None]]


class Shaper(Protocol):
    """Turns an extracted document into topics some other way than chunking (an LLM following an
    operator's instructions). The topics' sources are the shaper's; the ingestor adds the document's
    label, so re-ingesting and deleting the document work as for chunks. ``key`` names the recipe
    (e.g. the instructions), so changing it re-shapes an unchanged document."""

    key: str

    async def __call__(self, document: ExtractedDocument) -> list[Topic]:
        """The topics, or an empty list when shaping failed (the document is then chunked)."""
        ...


class IngestOutcome(BaseModel):
    model_config = ConfigDict(frozen=True)

    document: DocumentRecord
    unchanged: bool = False
    created: int = 0
    updated: int = 0
    deleted: int = 0
    embedded: int = 0


class ChunkPreview(BaseModel):
    model_config = ConfigDict(frozen=True)

    title: str
    format: str
    pages: int | None
    warnings: list[str]
    chunks: list[Topic]


def chunk_topics(
    doc_id: str, document: ExtractedDocument, chunks: Sequence[Chunk], labels: Sequence[str] = ()
) -> list[Topic]:
    """One topic per chunk: title = document title + heading path, facts = the heading path, the
    chunk text as summary, linked to its neighbours. A chunk under no heading, in a document titled
    only by its file name, is titled by its first sentence. Of a title and a top heading that repeats
    or contains it (or that it contains), only the longer is kept."""
    topics = []
    for position, chunk in enumerate(chunks):
        number = position + 1
        if chunk.heading_path or chunk.title or not document.title_from_name:
            lead = [] if document.title_is_heading and chunk.heading_path else [document.title]
            trail = [*_one_title(lead, list(chunk.heading_path)), *([chunk.title] if chunk.title else [])]
        else:
            trail = [_first_sentence(chunk.text)]
        title = " › ".join(part for part in trail if part)[:MAX_TITLE_CHARS] or document.title or "untitled"
        facts = list(chunk.heading_path)
        topics.append(Topic(
            source=chunk_source(doc_id, number),
            title=title,
            facts=facts,
            summary=chunk.text,
            labels=list(dict.fromkeys([RAG_CONTEXT_LABEL, document_label(doc_id), *labels])),
            prev_source=chunk_source(doc_id, number - 1) if position > 0 else None,
            next_source=chunk_source(doc_id, number + 1) if number < len(chunks) else None,
        ))
    return topics


def _one_title(lead: list[str], path: list[str]) -> list[str]:
    """``lead + path``, without the document title when the top heading says it again (or the top
    heading when the title says more): "Handbook" and "Clay Corner Studio - Customer handbook"."""
    if not (lead and lead[0] and path):
        return [*lead, *path]
    title, top = lead[0], path[0]
    if _says(top, title):
        return path
    if _says(title, top):
        return [title, *path[1:]]
    return [title, *path]


def _says(longer: str, shorter: str) -> bool:
    """Whether ``longer`` contains ``shorter`` as whole words, any case."""
    return re.search(rf"(?<!\w){re.escape(shorter.strip())}(?!\w)", longer, re.IGNORECASE) is not None


def _first_sentence(text: str, limit: int = 80) -> str:
    first = (sentences(text) or [""])[0]
    if len(first) <= limit:
        return first
    return first[:limit].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def _labelled(topics: Sequence[Topic], doc_id: str, labels: Sequence[str]) -> list[Topic]:
    return [
        t.model_copy(update={"labels": list(dict.fromkeys([*t.labels, document_label(doc_id), *labels]))})
        for t in topics
    ]


def _recipe_hash(
    data: bytes, fmt: str, options: ChunkingOptions, row_template: str | None, labels: Sequence[str],
    shaper: Shaper | None,
) -> str:
    recipe = json.dumps([
        TOPIC_SHAPE, fmt, options.model_dump(), row_template, sorted(labels), shaper.key if shaper else None
    ])
    digest = hashlib.sha256(data)
    digest.update(recipe.encode())
    return digest.hexdigest()


class DocumentIngestor:
    def __init__(
        self, documents: DocumentStore, catalog: BaseCatalog, *, lock: LockFactory | None = None,
        sandbox: ExtractionSandbox | None = None,
    ) -> None:
        self.documents = documents
        self.sandbox = sandbox or ExtractionSandbox()
        self._catalog = catalog
        self._locks: WeakValueDictionary[str, asyncio.Lock] = WeakValueDictionary()
        self._lock = lock or self._local_lock

    @contextlib.asynccontextmanager
    async def _local_lock(self, doc_id: str) -> AsyncIterator[None]:
        lock = self._locks.get(doc_id)
        if lock is None:
            lock = self._locks[doc_id] = asyncio.Lock()
        async with lock:
            yield

    async def preview(
        self, data: bytes, name: str, *, content_type: str | None = None, fmt: str | None = None,
        chunking: ChunkingOptions | None = None, row_template: str | None = None,
    ) -> ChunkPreview:
        """The chunk topics ``data`` would become; nothing is stored."""
        fmt = fmt or detect_format(name, content_type)
        prepared = await self.sandbox.prepare(data, name, fmt, row_template, chunking or ChunkingOptions())
        document, chunks = prepared.document, prepared.chunks
        return ChunkPreview(
            title=document.title, format=document.format, pages=document.pages, warnings=document.warnings,
            chunks=chunk_topics(document_id("preview", name), document, chunks),
        )

    async def ingest(
        self, kb: KnowledgeBase, *, name: str, data: bytes, content_type: str | None = None, fmt: str | None = None,
        chunking: ChunkingOptions | None = None, row_template: str | None = None, labels: Sequence[str] = (),
        origin: DocumentOrigin = "upload", url: str | None = None, shaper: Shaper | None = None,
    ) -> IngestOutcome:
        """Ingest one document into ``kb``. ``UnsupportedFormat`` is raised before anything is recorded;
        every other refusal is recorded on the document as ``failed``."""
        fmt = fmt or detect_format(name, content_type)
        options = chunking or ChunkingOptions()
        doc_id = document_id(kb.name, name)
        content_hash = _recipe_hash(data, fmt, options, row_template, labels, shaper)
        async with self._lock(doc_id):
            previous = await self.documents.get(doc_id)
            if previous is not None and previous.status == "ready" and previous.content_hash == content_hash:
                return IngestOutcome(document=previous, unchanged=True)
            record = (previous or DocumentRecord(id=doc_id, kb=kb.name, name=name)).model_copy(update={
                "format": fmt, "size": len(data), "origin": origin, "url": url, "labels": list(labels),
                "row_template": row_template,
                "status": "processing", "error": None,
            })
            await self.documents.put(record)
            try:
                prepared = await self.sandbox.prepare(data, name, fmt, row_template, options)
                document = prepared.document
                topics = _labelled(await shaper(document), doc_id, labels) if shaper is not None else []
                warnings = list(document.warnings)
                if shaper is not None and not topics:
                    warnings.append("no topics came back from shaping the text; it was chunked instead")
                if not topics:
                    topics = chunk_topics(doc_id, document, prepared.chunks, labels)
                if not topics:
                    raise ExtractionFailed("the document has no text to index")
            except ExtractionFailed as exc:
                failed = record.model_copy(update={"status": "failed", "error": exc.reason})
                return IngestOutcome(document=await self.documents.put(failed))
            except asyncio.CancelledError:  # the client left or the process is stopping: say so, then stop
                stopped = record.model_copy(update={"status": "failed", "error": STOPPED})
                await asyncio.shield(self.documents.put(stopped))
                raise
            try:
                before = set(await kb.sources_with_label(document_label(doc_id)))
                report = await kb.upsert_many(topics, reuse_label=document_label(doc_id))
                gone = sorted(before - {t.source for t in topics})
                deleted = await kb.delete_many(gone) if gone else 0
            except Exception as exc:
                failed = record.model_copy(update={"status": "failed", "error": f"storing the chunks failed: {exc}"})
                await self.documents.put(failed)
                raise
            done = record.model_copy(update={
                "status": "ready", "title": document.title, "content_hash": content_hash,
                "chunk_count": len(topics), "embedded": report.embedded, "warnings": warnings,
            })
            await self.documents.put(done)
            await self._catalog.touch(kb.name)
            return IngestOutcome(
                document=done, created=len(report.created), updated=len(report.updated), deleted=deleted,
                embedded=report.embedded,
            )

    async def remove(self, kb: KnowledgeBase, doc_id: str) -> int:
        """Delete a document and its chunk topics; how many topics went."""
        async with self._lock(doc_id):
            deleted = await kb.delete_label(document_label(doc_id))
            await self.documents.delete(doc_id)
            await self._catalog.touch(kb.name)
            return deleted


__all__ = ["ChunkPreview", "DocumentIngestor", "IngestOutcome", "UnsupportedFormat", "chunk_topics"]

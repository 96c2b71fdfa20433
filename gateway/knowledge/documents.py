"""Documents in the gateway: the one path from an uploaded file, a file on disk or a fetched page
to chunk topics (the API, the CLI, the website crawl and the console all call it), with the
document's original kept for re-ingesting."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from gateway.core.errors import NotFound, UnsupportedMediaType
from gateway.knowledge.bases import KnowledgeBases
from gateway.knowledge.originals import Originals
from rag_core.document import DocumentOrigin, DocumentRecord
from rag_core.document_ingestion import ChunkPreview, DocumentIngestor, IngestOutcome, Shaper
from rag_core.extract import FORMATS, UnsupportedFormat, detect_format

INTERRUPTED = ("interrupted: the process ingesting it stopped (a restart?) before it finished; "
               "upload it again or reingest it")


def check_format(name: str, content_type: str | None = None) -> str:
    try:
        return detect_format(name, content_type)
    except UnsupportedFormat as exc:
        supported = ", ".join(f"{fmt} ({' '.join(ext)})" for fmt, ext in FORMATS.items())
        raise UnsupportedMediaType(f"{name!r}: unsupported file type; supported: {supported}") from exc


class Documents:
    def __init__(self, bases: KnowledgeBases, ingestor: DocumentIngestor, originals: Originals) -> None:
        self._bases = bases
        self._ingestor = ingestor
        self._originals = originals

    async def ingest(
        self, kb_name: str, name: str, data: bytes, *, content_type: str | None = None,
        chunking: dict[str, Any] | None = None, row_template: str | None = None, labels: Sequence[str] = (),
        origin: DocumentOrigin = "upload", url: str | None = None, shaper: Shaper | None = None,
    ) -> IngestOutcome:
        info = await self._bases.info(kb_name)
        fmt = check_format(name, content_type)
        outcome = await self._ingestor.ingest(
            self._bases.instance(kb_name), name=name, data=data, content_type=content_type, fmt=fmt,
            chunking=self._bases.chunking_for(info, chunking), row_template=row_template, labels=labels,
            origin=origin, url=url, shaper=shaper,
        )
        if outcome.document.status == "ready" and not outcome.unchanged:
            await self._originals.save(outcome.document.id, data)
        return outcome

    async def preview(
        self, kb_name: str, name: str, data: bytes, *, content_type: str | None = None,
        chunking: dict[str, Any] | None = None, row_template: str | None = None,
    ) -> ChunkPreview:
        info = await self._bases.info(kb_name)
        fmt = check_format(name, content_type)
        return await self._ingestor.preview(
            data, name, content_type=content_type, fmt=fmt, chunking=self._bases.chunking_for(info, chunking),
            row_template=row_template,
        )

    async def fail_interrupted(self, stale_before: datetime | None) -> list[DocumentRecord]:
        """Mark documents left ``processing`` by a process that stopped as failed, saying so: all of them
        (``None``: this process owns the knowledge base, nobody else can be ingesting), or those not
        touched since ``stale_before``. Their earlier chunks, if any, stay as they were."""
        failed = []
        for record in await self._bases.documents.in_status("processing"):
            if stale_before is None or record.updated_at < stale_before:
                update = {"status": "failed", "error": INTERRUPTED}
                failed.append(await self._bases.documents.put(record.model_copy(update=update)))
        return failed

    async def list(self, kb_name: str, origin: DocumentOrigin | None = None) -> list[DocumentRecord]:
        await self._bases.info(kb_name)
        return await self._bases.documents.in_kb(kb_name, origin)

    async def get(self, doc_id: str) -> DocumentRecord:
        record = await self._bases.documents.get(doc_id)
        if record is None:
            raise NotFound(f"no document with id {doc_id!r}")
        return record

    async def delete(self, doc_id: str) -> int:
        record = await self.get(doc_id)
        deleted = await self._ingestor.remove(self._bases.instance(record.kb), doc_id)
        await self._originals.delete(doc_id)
        return deleted

    async def reingest(self, doc_id: str, *, chunking: dict[str, Any] | None = None) -> IngestOutcome:
        """Ingest the kept original again (with the knowledge base's current chunking, or ``chunking``)."""
        record = await self.get(doc_id)
        data = await self._originals.load(doc_id)
        if data is None:
            raise NotFound(f"the original of document {doc_id!r} is not kept here; upload it again")
        return await self.ingest(
            record.kb, record.name, data, chunking=chunking, row_template=record.row_template, labels=record.labels,
            origin=record.origin, url=record.url,
        )

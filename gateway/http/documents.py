"""Admin API for documents: upload files (multipart), list, get, delete, re-ingest, preview chunks.

Uploads are streamed to disk by the multipart parser. SWITCHBOARD_MAX_UPLOAD_MB is one file's limit,
exactly: a request larger than the limit plus the multipart framing (``upload_body_limit``) is refused
with 413 while it streams (see ``gateway.http.app``), and a file one byte over it with 413 once parsed.
The console's upload form has the same limits."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Request, Response
from starlette.datastructures import UploadFile

from gateway.core.errors import BadRequest, InvalidInput, PayloadTooLarge
from gateway.http.auth import require_admin
from gateway.http.json_body import AdminRoute
from gateway.http.knowledge import kb_call
from gateway.http.responses import ERROR_JSON, json_body
from gateway.knowledge.documents import check_format
from gateway.services import Services
from rag_core.document_ingestion import IngestOutcome

router = APIRouter(prefix="/api/kb/documents", route_class=AdminRoute)
UPLOAD_PATH = "/api/kb/documents"
PREVIEW_PATH = "/api/kb/documents/preview"
CONSOLE_UPLOAD_PATH = "/admin/knowledge/upload"  # the console's form (admin_ui), under the same limits
MAX_FILES = 100
FRAMING_BYTES = 64 * 1024  # a multipart request's boundaries and part headers besides the files


def upload_body_limit(max_upload_mb: int) -> int:
    """The request body limit of an upload path: one largest file and its framing."""
    return max_upload_mb * 1024 * 1024 + FRAMING_BYTES


def check_upload_size(upload: UploadFile, max_upload_mb: int) -> None:
    """``PayloadTooLarge`` for a file over SWITCHBOARD_MAX_UPLOAD_MB, to the byte."""
    limit = max_upload_mb * 1024 * 1024
    if upload.size is not None and upload.size > limit:
        raise PayloadTooLarge(f"file: {upload.filename} is {upload.size} bytes; the limit is {limit} bytes "
                              f"(SWITCHBOARD_MAX_UPLOAD_MB={max_upload_mb})")
_FILES = json_body({"type": "object", "required": ["file"], "properties": {
    "file": {"type": "array", "items": {"type": "string", "format": "binary"}}}}, media_type="multipart/form-data")
_UPLOADED = {"type": "object", "properties": {"job": {"type": "string"}, "documents": {"type": "array"},
                                              "message": {"type": "string"}}}
# 201 when every file is ingested; 422 is either the usual error body or, when a file failed, the upload's result.
_UPLOAD_ANSWERS = {
    201: {"description": "Every file ingested (or unchanged)", "content": {"application/json": {"schema": _UPLOADED}}},
    422: {"description": "A field is out of range, or a file failed (each failed document says why)", "content": {
        "application/json": {"schema": {"anyOf": [ERROR_JSON["application/json"]["schema"], _UPLOADED]}}}},
}


def _chunking(chunking: str | None, chunk_tokens: int | None, overlap_tokens: int | None) -> dict[str, Any] | None:
    given = {"strategy": chunking, "chunk_tokens": chunk_tokens, "overlap_tokens": overlap_tokens}
    return {k: v for k, v in given.items() if v is not None} or None


async def _files(request: Request, max_upload_mb: int) -> list[UploadFile]:
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise BadRequest("upload files as multipart/form-data (one or more parts named \"file\")")
    form = await request.form(max_files=MAX_FILES)
    files = [value for _, value in form.multi_items() if isinstance(value, UploadFile)]
    if not files:
        raise InvalidInput("file: no file in the upload (send one or more parts named \"file\")")
    for upload in files:
        if not upload.filename:
            raise InvalidInput("file: every file part needs a file name")
        check_format(upload.filename, upload.content_type)  # all refused before any is ingested
        check_upload_size(upload, max_upload_mb)
    return files


def _outcome(outcome: IngestOutcome) -> dict[str, Any]:
    return outcome.model_dump(mode="json")


@router.post("", status_code=201, openapi_extra=_FILES, responses=_UPLOAD_ANSWERS)
async def upload(
    request: Request, response: Response, kb: str = "main",
    chunking: Literal["recursive", "paragraph", "sentence", "fixed"] | None = None,
    chunk_tokens: int | None = None, overlap_tokens: int | None = None, row_template: str | None = None,
    services: Services = Depends(require_admin),
) -> dict:
    """One or more files → documents in ``kb``. 201 when every file is ingested (or unchanged);
    422 when any failed (each failed document says why; the others are ingested)."""
    documents = services.knowledge.documents
    await kb_call(services.knowledge.bases.info(kb))
    options = _chunking(chunking, chunk_tokens, overlap_tokens)
    files = await _files(request, services.settings.max_upload_mb)
    jobs = services.ingest_jobs
    assert jobs is not None
    job = await jobs.create("documents", kb, total=len(files))  # the console shows files done of total
    await jobs.update(job.id, status="running")
    results = []
    try:
        for upload_file in files:
            data = await upload_file.read()
            outcome = await kb_call(documents.ingest(
                kb, upload_file.filename or "", data, content_type=upload_file.content_type, chunking=options,
                row_template=row_template,
            ))
            results.append(outcome)
            failed_one = outcome.document.status == "failed"
            if failed_one:
                await jobs.problem(job.id, f"{outcome.document.name}: {outcome.document.error}")
            await jobs.advance(job.id, done=1, errors=int(failed_one))
    except Exception as exc:
        await jobs.finish(job.id, "failed", f"stopped after {len(results)} of {len(files)} file(s): {exc}")
        raise
    failed = [r.document for r in results if r.document.status == "failed"]
    await jobs.finish(
        job.id, "failed" if failed and len(failed) == len(results) else "done",
        f"{len(results) - len(failed)} of {len(results)} file(s) ingested",
        topics_created=sum(r.created for r in results), topics_updated=sum(r.updated for r in results),
        topics_deleted=sum(r.deleted for r in results),
    )
    response.status_code = 422 if failed else 201
    body: dict[str, Any] = {"job": job.id, "documents": [_outcome(r) for r in results]}
    if failed:
        body["message"] = "; ".join(f"{d.name}: {d.error}" for d in failed)
    return body


@router.post("/preview", openapi_extra=_FILES)
async def preview(
    request: Request, kb: str = "main",
    chunking: Literal["recursive", "paragraph", "sentence", "fixed"] | None = None,
    chunk_tokens: int | None = None, overlap_tokens: int | None = None, row_template: str | None = None,
    services: Services = Depends(require_admin),
) -> dict:
    """The chunk topics one file would become; nothing is stored."""
    files = await _files(request, services.settings.max_upload_mb)
    if len(files) != 1:
        raise InvalidInput("file: preview takes exactly one file")
    data = await files[0].read()
    result = await kb_call(services.knowledge.documents.preview(
        kb, files[0].filename or "", data, content_type=files[0].content_type,
        chunking=_chunking(chunking, chunk_tokens, overlap_tokens), row_template=row_template,
    ))
    return result.model_dump(mode="json")


@router.get("")
async def list_documents(
    kb: str = "main", origin: Literal["upload", "path", "website"] | None = None,
    services: Services = Depends(require_admin),
) -> dict:
    records = await kb_call(services.knowledge.documents.list(kb, origin))
    return {"documents": [r.model_dump(mode="json") for r in records], "total": len(records)}


@router.get("/{doc_id}")
async def get_document(doc_id: str, services: Services = Depends(require_admin)) -> dict:
    return (await kb_call(services.knowledge.documents.get(doc_id))).model_dump(mode="json")


@router.delete("/{doc_id}")
async def delete_document(doc_id: str, services: Services = Depends(require_admin)) -> dict:
    return {"deleted_topics": await kb_call(services.knowledge.documents.delete(doc_id))}


@router.post("/{doc_id}/reingest")
async def reingest(
    doc_id: str, response: Response,
    chunking: Literal["recursive", "paragraph", "sentence", "fixed"] | None = None,
    chunk_tokens: int | None = None, overlap_tokens: int | None = None,
    services: Services = Depends(require_admin),
) -> dict:
    outcome = await kb_call(services.knowledge.documents.reingest(
        doc_id, chunking=_chunking(chunking, chunk_tokens, overlap_tokens)
    ))
    response.status_code = 422 if outcome.document.status == "failed" else 200
    return _outcome(outcome)

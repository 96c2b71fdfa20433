"""Knowledge: the knowledge bases and their documents, "Upload files" (several at once, each with
its outcome), and the "Retrieval test" — the production search path, ``Knowledge.search``, as
``POST /api/kb/search`` uses it. Operators read; admins change."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from starlette.datastructures import UploadFile

from admin_ui.render import page
from admin_ui.security import PREFIX, Signed, admin_only, check_csrf, signed_in
from gateway.core.errors import GatewayError
from gateway.knowledge.search import MAX_QUERY_CHARS
from rag_core.errors import RagError
from rag_core.retrieval import ChatTurn

router = APIRouter(prefix=f"{PREFIX}/knowledge")


async def _page(request: Request, signed: Signed, status_code: int = 200, **context) -> Response:
    knowledge = signed.services.knowledge
    assert knowledge is not None
    kb = request.query_params.get("kb") or context.pop("kb", "main")
    problems = []
    try:
        bases = [await knowledge.bases.describe(info.name) for info in await knowledge.bases.catalog.all()]
        documents = await knowledge.documents.list(kb)
    except (GatewayError, RagError) as exc:  # Qdrant down, or an unknown base: say so, keep the page
        bases, documents = [], []
        problems.append(f"The knowledge base cannot be read: {exc}")
    return page(request, "knowledge.html", signed, status_code, bases=bases, documents=documents, kb=kb,
                strategies=sorted(knowledge.strategies), default_strategy=knowledge.default_strategy,
                problems=problems, **context)


@router.get("")
async def knowledge(request: Request, signed: Signed = Depends(signed_in)) -> Response:
    return await _page(request, signed)


@router.post("/upload")
async def upload(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    kb = str(form.get("kb", "main"))
    files = [v for _, v in form.multi_items() if isinstance(v, UploadFile) and v.filename]
    outcomes = []
    for upload_file in files:
        try:
            outcome = await signed.services.knowledge.documents.ingest(
                kb, upload_file.filename or "", await upload_file.read(), content_type=upload_file.content_type
            )
            doc = outcome.document
            status = "unchanged" if outcome.unchanged else doc.status
            outcomes.append((doc.name, status, doc.error or f"{doc.chunk_count} chunks, {outcome.embedded} embedded"))
        except GatewayError as exc:  # an unsupported type, an unknown base: this file's row says why
            outcomes.append((upload_file.filename, "refused", str(exc)))
    if not files:
        return await _page(request, signed, 422, kb=kb, upload_error="Choose one or more files to upload.")
    failed = any(status in ("failed", "refused") for _, status, _ in outcomes)
    return await _page(request, signed, 422 if failed else 200, kb=kb, uploads=outcomes)


@router.post("/search")
async def retrieval_test(request: Request, signed: Signed = Depends(signed_in)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    query = str(form.get("query", "")).strip()
    history_text = str(form.get("history", ""))
    strategy = str(form.get("strategy", "")) or None
    typed = {"query": query, "history": history_text, "strategy": strategy or "", "k": str(form.get("k", "5"))}
    try:
        k = int(typed["k"])
        if not 1 <= k <= 50:
            raise ValueError
    except ValueError:
        return await _page(request, signed, 422, typed=typed, search_error="k: a whole number from 1 to 50")
    if not query or len(query) > MAX_QUERY_CHARS:
        return await _page(request, signed, 422, typed=typed,
                           search_error=f"Query: between 1 and {MAX_QUERY_CHARS} characters")
    history = [ChatTurn(role="user", text=line.strip()) for line in history_text.splitlines() if line.strip()]
    try:
        result = await signed.services.knowledge.search(query, history, strategy=strategy, k=k)
    except (GatewayError, RagError) as exc:
        return await _page(request, signed, 422, typed=typed, search_error=str(exc))
    return await _page(request, signed, typed=typed, result=result)

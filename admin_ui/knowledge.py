"""Knowledge: the knowledge bases and their documents (re-ingest, delete), "Upload files" (several at
once, each with its outcome; with script, each file uploads on its own with a progress bar), pasted
text and website imports (``admin_ui.kb_jobs``), the topics (``admin_ui.topics``), the "Retrieval
test" — the production search path, ``Knowledge.search``, as ``POST /api/kb/search`` uses it — and
the newest retrievals real turns made. Operators read; admins change."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.datastructures import UploadFile

from admin_ui.notices import notice
from admin_ui.render import page
from admin_ui.security import PREFIX, Signed, admin_only, check_csrf, signed_in
from gateway.core.errors import GatewayError
from gateway.http.documents import check_upload_size
from gateway.knowledge.demo import demo_attributes_present, demo_topics_present, remove_demo
from gateway.knowledge.search import MAX_QUERY_CHARS
from rag_core.errors import RagError
from rag_core.retrieval import ChatTurn

router = APIRouter(prefix=f"{PREFIX}/knowledge")


TABS = (("documents", "Documents"), ("imports", "Add text or a website"), ("test", "Retrieval test"))


def _tab(request: Request, context: dict) -> str:
    """The tab asked for; a form's outcome shows on the tab the form lives on."""
    if {"result", "search_error"} & context.keys():
        return "test"
    if {"append_error", "crawl_error"} & context.keys():
        return "imports"
    asked = request.query_params.get("tab", "")
    return asked if asked in dict(TABS) else "documents"


async def knowledge_page(request: Request, signed: Signed, status_code: int = 200, **context) -> Response:
    context.setdefault("tab", _tab(request, context))
    knowledge = signed.services.knowledge
    assert knowledge is not None
    kb = request.query_params.get("kb") or context.pop("kb", "main")
    problems = list(context.pop("problems", []))  # what the caller refused, then what the page cannot read
    try:
        bases = [await knowledge.bases.describe(info.name, count_retrieval=False)
                 for info in await knowledge.bases.catalog.all()]
        documents = await knowledge.documents.list(kb)
        demo = await demo_topics_present(knowledge) if kb == "main" else 0
    except (GatewayError, RagError) as exc:  # Qdrant down, or an unknown base: say so, keep the page
        bases, documents, demo = [], [], 0
        problems.append(f"The knowledge base cannot be read: {exc}")
    try:
        recent = await signed.services.store.recent_retrievals()
        cache = await knowledge.cache.stats() if knowledge.cache is not None else None
        demo_values = await demo_attributes_present(signed.services.customer_attributes) if kb == "main" else []
    except Exception:  # Redis away: the status of the rest of the page says so
        recent, cache, demo_values = [], None, []
    return page(request, "knowledge.html", signed, status_code, bases=bases, documents=documents, kb=kb,
                recent=recent, done=request.query_params.get("done"), cache=cache, controls=knowledge.controls,
                strategies=sorted(knowledge.strategies), default_strategy=knowledge.default_strategy,
                problems=problems, demo=demo, demo_values=demo_values, tabs=TABS, **context)


@router.get("")
async def knowledge(request: Request, signed: Signed = Depends(signed_in)) -> Response:
    return await knowledge_page(request, signed)


@router.post("/upload")
async def upload(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    kb = str(form.get("kb", "main"))
    files = [v for _, v in form.multi_items() if isinstance(v, UploadFile) and v.filename]
    outcomes = []
    for upload_file in files:
        try:
            check_upload_size(upload_file, signed.services.settings.max_upload_mb)
            outcome = await signed.services.knowledge.documents.ingest(
                kb, upload_file.filename or "", await upload_file.read(), content_type=upload_file.content_type
            )
            doc = outcome.document
            status = "unchanged" if outcome.unchanged else doc.status
            outcomes.append((doc.name, status, doc.error or f"{doc.chunk_count} chunks, {outcome.embedded} embedded"))
        except GatewayError as exc:  # an unsupported type, an unknown base: this file's row says why
            outcomes.append((upload_file.filename, "refused", str(exc)))
    wants_json = "application/json" in request.headers.get("accept", "")
    if not files:
        if wants_json:
            return JSONResponse({"rows": [], "error": "Choose one or more files to upload."}, status_code=422)
        return await knowledge_page(request, signed, 422, kb=kb, upload_error="Choose one or more files to upload.")
    failed = any(status in ("failed", "refused") for _, status, _ in outcomes)
    if wants_json:  # the page script's one-file-at-a-time upload
        return JSONResponse({"rows": [list(row) for row in outcomes]}, status_code=422 if failed else 200)
    return await knowledge_page(request, signed, 422 if failed else 200, kb=kb, uploads=outcomes)


@router.post("/documents/{doc_id}/{action}")
async def document_action(doc_id: str, action: str, request: Request, signed: Signed = Depends(admin_only)) -> Response:
    """Re-ingest a document from its kept original, or delete it and its chunks."""
    await check_csrf(request, signed)
    documents = signed.services.knowledge.documents
    try:
        record = await documents.get(doc_id)
        if action == "reingest":
            outcome = await documents.reingest(doc_id)
            done = f"re-ingested {record.name}: {outcome.document.status}, {outcome.document.chunk_count} chunks"
        elif action == "delete":
            done = f"deleted {record.name} ({await documents.delete(doc_id)} chunks)"
        else:
            return await knowledge_page(request, signed, 404, kb=record.kb, problems=[f"No action {action!r}"])
    except (GatewayError, RagError) as exc:
        return await knowledge_page(request, signed, 422, problems=[str(exc)])
    return RedirectResponse(f"{PREFIX}/knowledge?kb={quote(record.kb)}&done={notice(signed, done)}", status_code=303)


# The retrieval controls the console's retrieval test offers (the rest: POST /api/kb/search).
FORM_CONTROLS = ("relevance_threshold", "selection_strategy", "mmr_lambda", "max_results", "max_context_tokens",
                 "reranker", "recency_boost")
FORM_SWITCHES = ("multi_query", "adaptive_routing", "query_reformulation")


def _form_controls(form) -> dict:
    """The controls typed in the form (blank: the agent's setting); validation happens in ``controls_for``."""
    controls: dict = {name: str(form.get(name, "")).strip() for name in FORM_CONTROLS}
    controls = {name: value for name, value in controls.items() if value}
    for name in FORM_SWITCHES:
        if form.get(name):
            controls[name] = True
    if form.get("bypass_cache"):
        controls["semantic_cache"] = False
    return controls


@router.post("/search")
async def retrieval_test(request: Request, signed: Signed = Depends(signed_in)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    query = str(form.get("query", "")).strip()
    history_text = str(form.get("history", ""))
    strategy = str(form.get("strategy", "")) or None
    controls = _form_controls(form)
    typed = {"query": query, "history": history_text, "strategy": strategy or "", "k": str(form.get("k", "5")),
             **{name: str(value) for name, value in controls.items()}}
    try:
        k = int(typed["k"])
        if not 1 <= k <= 50:
            raise ValueError
    except ValueError:
        return await knowledge_page(request, signed, 422, typed=typed, search_error="k: a whole number from 1 to 50")
    if not query or len(query) > MAX_QUERY_CHARS:
        return await knowledge_page(request, signed, 422, typed=typed,
                           search_error=f"Query: between 1 and {MAX_QUERY_CHARS} characters")
    history = [ChatTurn(role="user", text=line.strip()) for line in history_text.splitlines() if line.strip()]
    knowledge = signed.services.knowledge
    try:
        result = await knowledge.search(query, history, strategy=strategy, k=k, controls=controls)
    except (GatewayError, RagError) as exc:
        return await knowledge_page(request, signed, 422, typed=typed, search_error=str(exc))
    legs = sorted({leg for hit in result.hits for leg in hit.legs if leg in LEG_NAMES}, key=LEG_NAMES.index)
    return await knowledge_page(request, signed, typed=typed, result=result, legs=legs)


LEG_NAMES = ["bm25", "dense", "fused", "rerank", "llm_rank"]


@router.post("/demo/remove")
async def remove_the_demo(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    removal = await remove_demo(signed.services.knowledge, signed.services.customer_attributes)
    said = removal.summary()
    said = said[0].upper() + said[1:]
    if removal.attributes:  # the prompt now says "an AI assistant": point at where the business's own go
        said += ". Set your business name and hours on Live data"
    return RedirectResponse(f"{PREFIX}/knowledge?done={notice(signed, said)}", status_code=303)


@router.post("/cache/clear")
async def clear_cache(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    cache = signed.services.knowledge.cache
    cleared = await cache.clear() if cache is not None else 0
    return RedirectResponse(f"{PREFIX}/knowledge?done={notice(signed, f'Cleared {cleared} cached searches')}",
                            status_code=303)

"""Knowledge → pasted text and website imports, and the ingestion jobs they start, with live progress.

"Add text" writes the append-text attribute (as ``PUT /api/attributes`` does), which queues the
append job; "Import website" queues a crawl as ``POST /api/kb/crawl`` does. The jobs page lists
recent jobs with their progress; its script re-reads the list every second while a job is queued
or running (without script, reload). Admins start jobs; operators watch."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from admin_ui.knowledge import knowledge_page
from admin_ui.render import TEMPLATES, page
from admin_ui.security import PREFIX, Signed, admin_only, check_csrf, signed_in
from gateway.core.errors import GatewayError
from gateway.knowledge.appends import APPEND_TEXT
from gateway.knowledge.crawler import CrawlLimits
from gateway.knowledge.websites import parse_sites
from rag_core.errors import RagError

router = APIRouter(prefix=f"{PREFIX}/knowledge")
ACTIVE = ("queued", "running")


@router.get("/jobs")
async def jobs(request: Request, signed: Signed = Depends(signed_in)) -> Response:
    assert signed.services.ingest_jobs is not None
    recent = await signed.services.ingest_jobs.recent(20)
    context = {"jobs": recent, "active": any(j.status in ACTIVE for j in recent),
               "highlight": request.query_params.get("job")}
    if request.query_params.get("fragment") == "rows":
        return TEMPLATES.TemplateResponse(request, "kb_job_rows.html", {**context, "signed": signed})
    return page(request, "kb_jobs.html", signed, **context)


@router.post("/append")
async def append_text(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    text = str((await request.form()).get("text", ""))
    if not text.strip():
        return await _knowledge(request, signed, append_error="Text: paste something first", typed_text=text)
    try:
        await signed.services.customer_attributes.set(APPEND_TEXT.name, text)  # queues the append job
    except GatewayError as exc:
        return await _knowledge(request, signed, append_error=exc.message, typed_text=text)
    return RedirectResponse(f"{PREFIX}/knowledge/jobs", status_code=303)


@router.post("/crawl")
async def import_website(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    typed = {k: str(form.get(k, "")).strip() for k in ("url", "kb", "max_depth", "max_pages")}
    settings = signed.services.settings
    try:
        site = parse_sites(typed["url"])
        if len(site) != 1 or not site[0].url.startswith(("http://", "https://")):
            raise ValueError(f"Website: {typed['url']!r} is not one http(s) address")
        limits = CrawlLimits(max_depth=int(typed["max_depth"] or settings.crawl_max_depth),
                             max_pages=int(typed["max_pages"] or settings.crawl_max_pages),
                             per_host_delay_s=settings.crawl_delay_s)
        assert signed.services.appends is not None
        job = await signed.services.appends.queue_crawl(site[0].url, typed["kb"] or "main", limits, None)
    except (ValueError, GatewayError, RagError) as exc:
        message = exc.message if isinstance(exc, GatewayError) else str(exc)
        return await _knowledge(request, signed, crawl_error=message, typed_crawl=typed)
    return RedirectResponse(f"{PREFIX}/knowledge/jobs?job={quote(job.id)}", status_code=303)


async def _knowledge(request: Request, signed: Signed, **context) -> Response:
    return await knowledge_page(request, signed, 422, **context)  # the page these forms live on

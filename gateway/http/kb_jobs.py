"""Admin API for long ingestion work: start a crawl, and read any job's progress and outcome
(uploads, crawls, appended text and websites)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Request

from gateway.core.errors import InvalidInput, NotFound
from gateway.http.auth import require_admin
from gateway.http.json_body import AdminRoute, read_json
from gateway.http.knowledge import kb_call
from gateway.http.responses import json_body
from gateway.knowledge.crawler import CrawlLimits
from gateway.knowledge.websites import parse_sites
from gateway.services import Services

router = APIRouter(prefix="/api/kb", route_class=AdminRoute)


@router.get("/jobs")
async def list_jobs(
    limit: int = 50, kind: Literal["documents", "crawl", "append_text", "append_websites"] | None = None,
    services: Services = Depends(require_admin),
) -> dict:
    if not 1 <= limit <= 500:
        raise InvalidInput("limit: must be between 1 and 500")
    assert services.ingest_jobs is not None
    return {"jobs": [job.model_dump(mode="json") for job in await services.ingest_jobs.recent(limit, kind)]}


@router.get("/jobs/{job_id}")
async def get_job(job_id: str, services: Services = Depends(require_admin)) -> dict:
    assert services.ingest_jobs is not None
    job = await services.ingest_jobs.get(job_id)
    if job is None:
        raise NotFound(f"no ingestion job {job_id!r}")
    return job.model_dump(mode="json")


_CRAWL = {"type": "object", "required": ["url"], "additionalProperties": False, "properties": {
    "url": {"type": "string"}, "kb": {"type": "string"}, "max_depth": {"type": "integer"},
    "max_pages": {"type": "integer"}, "instructions": {"type": "string"}}}


@router.post("/crawl", status_code=202, openapi_extra=json_body(_CRAWL))
async def crawl(request: Request, services: Services = Depends(require_admin)) -> dict:
    """``{"url", "kb"?, "max_depth"?, "max_pages"?, "instructions"?}`` → the queued crawl job."""
    data: Any = await read_json(request)
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        raise InvalidInput("url: required, the site's address, e.g. {\"url\": \"https://example.com/\"}")
    unknown = sorted(set(data) - {"url", "kb", "max_depth", "max_pages", "instructions"})
    if unknown:
        raise InvalidInput(f"body: unknown field(s) {', '.join(unknown)}")
    site = parse_sites(data["url"])
    if len(site) != 1 or not site[0].url.startswith(("http://", "https://")):
        raise InvalidInput(f"url: {data['url']!r} is not one http(s) URL")
    settings = services.settings
    try:
        limits = CrawlLimits(
            max_depth=data.get("max_depth", settings.crawl_max_depth),
            max_pages=data.get("max_pages", settings.crawl_max_pages), per_host_delay_s=settings.crawl_delay_s,
        )
    except ValueError as exc:
        raise InvalidInput(f"limits: {exc}") from exc
    instructions = data.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidInput("instructions: must be a string")
    assert services.appends is not None
    job = await kb_call(services.appends.queue_crawl(site[0].url, data.get("kb", "main"), limits, instructions))
    return job.model_dump(mode="json")

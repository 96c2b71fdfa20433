"""Liveness, readiness (Redis, Qdrant, queues) and Prometheus metrics."""

from __future__ import annotations

import asyncio
import hmac
from contextlib import suppress

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError

from gateway.core.errors import Unauthorized
from gateway.http.auth import bearer_token, services_of
from gateway.http.responses import error_responses

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}


_NOT_READY = {503: {"description": "Not ready: the same body, naming the failed checks"}}


@router.get("/readyz", responses=_NOT_READY)
async def readyz(request: Request) -> JSONResponse:
    services = services_of(request)
    checks = {"redis": services.redis.ping, **services.readiness}
    results: dict[str, str] = {}
    for name, check in checks.items():
        try:
            await asyncio.wait_for(check(), timeout=2.0)
            results[name] = "ok"
        except Exception as exc:  # any failure means not ready; say which and why
            results[name] = f"failed: {type(exc).__name__}"
    ready = all(v == "ok" for v in results.values())
    return JSONResponse({"ready": ready, "checks": results}, status_code=200 if ready else 503)


@router.get("/metrics", response_class=PlainTextResponse, responses={
    200: {"content": {"text/plain": {"schema": {"type": "string"}}}}, **error_responses(401, 503)})
async def metrics(request: Request) -> Response:
    services = services_of(request)
    expected = services.settings.metrics_token
    if expected is not None:
        token = bearer_token(request) or ""
        if not hmac.compare_digest(token.encode(), expected.get_secret_value().encode()):
            raise Unauthorized("/metrics needs Authorization: Bearer <SWITCHBOARD_METRICS_TOKEN>")
    for name, queue in services.queues.items():
        count = await asyncio.to_thread(lambda q=queue: q.count)
        services.metrics.queue_depth.labels(name).set(count)
    cache = services.knowledge.cache
    if cache is not None:
        with suppress(RedisError):
            services.metrics.semantic_cache_entries.set((await cache.stats())["entries"])
    return Response(generate_latest(services.metrics.registry), media_type=CONTENT_TYPE_LATEST)

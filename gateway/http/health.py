"""Liveness, readiness (Redis, Qdrant, queues) and Prometheus metrics."""

from __future__ import annotations

import asyncio
from contextlib import suppress

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError

from gateway.http.auth import services_of

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}


@router.get("/readyz")
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


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    services = services_of(request)
    for name, queue in services.queues.items():
        count = await asyncio.to_thread(lambda q=queue: q.count)
        services.metrics.queue_depth.labels(name).set(count)
    cache = services.knowledge.cache
    if cache is not None:
        with suppress(RedisError):
            services.metrics.semantic_cache_entries.set((await cache.stats())["entries"])
    return Response(generate_latest(services.metrics.registry), media_type=CONTENT_TYPE_LATEST)

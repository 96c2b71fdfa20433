"""``GET /api/inbox``: what waits for a turn consumer (and why: ``waiting``) and what was dead-lettered;
retry a dead letter (admin)."""

from __future__ import annotations

import re
from dataclasses import asdict

from fastapi import APIRouter, Depends

from gateway.core.errors import NotFound
from gateway.http.auth import require_admin
from gateway.services import Services

router = APIRouter(prefix="/api/inbox")
_STREAM_ID = re.compile(r"\d{1,20}-\d{1,20}")


@router.get("")
async def inbox_state(services: Services = Depends(require_admin)) -> dict:
    assert services.inbox is not None
    stats = await services.inbox.stats()
    waiting = [w.public() for w in await services.inbox.retries.all()]
    return {**asdict(stats), "waiting": waiting, "dead_letters": await services.inbox.dead_letters()}


@router.post("/dead/{dead_id}/retry")
async def retry_dead_letter(dead_id: str, services: Services = Depends(require_admin)) -> dict:
    assert services.inbox is not None
    if not _STREAM_ID.fullmatch(dead_id):
        raise NotFound(f"no dead letter {dead_id[:64]!r} (ids look like 1700000000000-0)")
    if not await services.inbox.retry_dead(dead_id):
        raise NotFound(f"no dead letter {dead_id!r}")
    return {"requeued": dead_id}

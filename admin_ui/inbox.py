"""The inbox: deliveries waiting (why, and when they are tried next) and in flight, dead letters
with their reason; "Retry" (admins) queues a dead letter again — the same calls as ``/api/inbox``."""

from __future__ import annotations

import re
import time

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from admin_ui.notices import notice, shown
from admin_ui.render import page
from admin_ui.security import PREFIX, Signed, admin_only, check_csrf, signed_in

router = APIRouter(prefix=f"{PREFIX}/inbox")
_STREAM_ID = re.compile(r"\d{1,20}-\d{1,20}")


@router.get("")
async def inbox(request: Request, signed: Signed = Depends(signed_in)) -> Response:
    stream = signed.services.inbox
    assert stream is not None
    return page(request, "inbox.html", signed, stats=await stream.stats(), dead=await stream.dead_letters(),
                waiting=await stream.retries.all(), now=time.time(),
                done=request.query_params.get("done"), error=shown(signed, request.query_params.get("error")))


@router.post("/dead/{dead_id}/retry")
async def retry(dead_id: str, request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    stream = signed.services.inbox
    assert stream is not None
    if not _STREAM_ID.fullmatch(dead_id) or not await stream.retry_dead(dead_id):
        return RedirectResponse(f"{PREFIX}/inbox?error={notice(signed, 'no such dead letter')}", status_code=303)
    return RedirectResponse(f"{PREFIX}/inbox?done={notice(signed, f'requeued {dead_id}')}", status_code=303)

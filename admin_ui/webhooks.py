"""Event webhooks on the Insights screen (admins): add an endpoint (URL, events, an optional secret; one the
gateway makes is shown once, in the answer to the form, never in a URL) and delete one. The list and each
endpoint's delivery log are on the screen itself; the same as ``/api/webhooks``."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError

from admin_ui.insights import insights_page
from admin_ui.notices import notice
from admin_ui.security import PREFIX, Signed, admin_only, check_csrf
from gateway.core.errors import GatewayError
from gateway.core.outbound import shown
from gateway.insight.webhooks import EndpointIn

router = APIRouter(prefix=f"{PREFIX}/insights/webhooks")


@router.post("")
async def add(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    assert signed.services.insight is not None
    typed = {"url": str(form.get("url", "")).strip(), "events": [str(e) for e in form.getlist("events")],
             "description": str(form.get("description", "")).strip()}
    secret = str(form.get("secret", "")).strip()
    try:
        spec = EndpointIn(**typed, secret=secret or None)
        endpoint, secret, made_here = await signed.services.insight.webhooks.create(spec)
    except ValidationError as exc:
        problem = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'form'}: {e['msg']}" for e in exc.errors())
        return await insights_page(request, signed, status_code=422, webhook_error=problem, webhook_typed=typed)
    except GatewayError as exc:  # a URL the outbound guard refuses, too many webhooks: said next to the form
        return await insights_page(request, signed, status_code=422, webhook_error=str(exc), webhook_typed=typed)
    created = {"id": endpoint.id, "url": shown(endpoint.url), "secret": secret if made_here else None}
    return await insights_page(request, signed, status_code=201, webhook_created=created)


@router.post("/{endpoint_id}/delete")
async def delete(endpoint_id: str, request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    assert signed.services.insight is not None
    await signed.services.insight.webhooks.delete(endpoint_id)
    done = notice(signed, "webhook deleted: its waiting events and delivery log went with it")
    return RedirectResponse(f"{PREFIX}/insights?done={done}#webhooks-h", status_code=303)

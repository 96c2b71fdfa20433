"""The operator console at ``/admin``, installed through the ``switchboard.plugins`` entry point.
Server-rendered pages over the same services the JSON API uses."""

from __future__ import annotations

from pathlib import Path

import redis
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from admin_ui import (
    channels,
    conversations,
    inbox,
    insights,
    kb_jobs,
    knowledge,
    live_data,
    operators,
    overview,
    prompt,
    signin,
    tools,
    topics,
    webhooks,
)
from admin_ui.render import page
from admin_ui.security import PREFIX, BadCsrf, NotAllowed, SecurityHeaders, SignInRequired, sign_in_url
from gateway.channel import ChannelContext, GatewayError, failure
from gateway.http.responses import ERROR_JSON, error_responses

_HTML = {"text/html": {"schema": {"type": "string"}}}
# A console page answers HTML, errors included (a page saying what was refused); what is refused before
# the page's code runs (an oversized body, a malformed query) gets the gateway's JSON error body.
CONSOLE_RESPONSES = {
    303: {"description": "To sign-in without a live session; after a form is handled, to the page that shows it"},
    **{status: {**{k: v for k, v in entry.items() if k != "model"}, "content": {**_HTML, **ERROR_JSON}}
       for status, entry in error_responses(400, 401, 403, 404, 409, 413, 415, 422, 429, 503).items()},
}


async def _sign_in(request: Request, exc: SignInRequired) -> Response:
    return RedirectResponse(sign_in_url(exc.next_path), status_code=303)


async def _not_allowed(request: Request, exc: NotAllowed) -> Response:
    return page(request, "message.html", None, 403, heading="Not allowed",
                message="Your role does not allow this. Ask an admin.", back=PREFIX)


async def _bad_csrf(request: Request, exc: BadCsrf) -> Response:
    return page(request, "message.html", None, 403, heading="Form expired",
                message="This form was not sent from the console (or your session changed). Reload and try again.",
                back=PREFIX)


def _console_failures(api_handler):
    """Redis or the knowledge base away (or any domain error a page did not handle): on a console page
    an HTML page that says which, with a way back; elsewhere the gateway's own JSON answer."""

    async def handle(request: Request, exc: Exception) -> Response:
        if not request.url.path.startswith(PREFIX):
            return await api_handler(request, exc)
        status, _, message = failure(exc)
        if status >= 500 and isinstance(exc, redis.RedisError):
            message = (f"{message}. The console keeps its sessions in Redis, so it cannot be used until Redis is "
                       "back; /readyz says what else is down.")
        return page(request, "message.html", None, status, heading="Not available right now" if status >= 500
                    else "Refused", message=message, back=PREFIX)

    return handle


def install(app: FastAPI, context: ChannelContext) -> None:
    app.add_middleware(SecurityHeaders)
    app.add_exception_handler(SignInRequired, _sign_in)
    app.add_exception_handler(NotAllowed, _not_allowed)
    app.add_exception_handler(BadCsrf, _bad_csrf)
    for error in (redis.RedisError, GatewayError):
        app.add_exception_handler(error, _console_failures(app.exception_handlers[error]))
    app.mount(f"{PREFIX}/static", StaticFiles(directory=Path(__file__).parent / "static"), name="console-static")
    for module in (signin, overview, operators, channels, topics, kb_jobs, knowledge, inbox, conversations, prompt,
                   live_data, insights, webhooks, tools):
        app.include_router(module.router, default_response_class=HTMLResponse, responses=CONSOLE_RESPONSES)

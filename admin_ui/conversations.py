"""Conversations: a live list (filters by channel, status, outcome and text), each conversation's cross-channel
transcript with every agent message's turn trace, and the handoff — "Take over", "Reply" / "Send",
"Hand back" — through the same ``OperatorDesk`` for every channel. Operators and admins may both do
all of it. Live updates arrive over SSE (``/admin/conversations/events``); the page script re-reads
the part of the page that changed, and without script everything works by reloading."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response, StreamingResponse

from admin_ui.notices import notice
from admin_ui.render import TEMPLATES, page
from admin_ui.security import PREFIX, Signed, check_csrf, signed_in
from gateway.conversation.listing import STATUSES, Filters
from gateway.conversation.outcome_index import OUTCOMES
from gateway.core.errors import GatewayError, NotFound
from gateway.core.models import Message, Role, TurnTrace

router = APIRouter(prefix=f"{PREFIX}/conversations")
KEEP_ALIVE_S = 5.0
SELECTED_BY = {"llm_select": "LLM selection", "hybrid_llm": "LLM selection", "queued": "queued job",
               "agentic": "the model's tool calls"}


@router.get("")
async def conversations(request: Request, signed: Signed = Depends(signed_in)) -> Response:
    filters = Filters.of(request.query_params)
    problems = []
    try:
        assert signed.services.conversations is not None
        rows, more = await signed.services.conversations.page(filters)
    except GatewayError as exc:
        rows, more = [], False
        problems.append(str(exc))
    context = {"rows": rows, "more": more, "filters": filters, "statuses": STATUSES, "outcomes": OUTCOMES,
               "channels": sorted(signed.services.pipeline.capabilities), "problems": problems}
    if request.query_params.get("fragment") == "rows":
        return TEMPLATES.TemplateResponse(request, "conversation_rows.html", context)
    return page(request, "conversations.html", signed, **context)


@router.get("/events", response_class=StreamingResponse, responses={200: {
    "description": "Server-sent events: which conversation changed", "content": {"text/event-stream": {"schema": {
        "type": "object", "properties": {"conversation_id": {"type": "string"}, "message_id": {"type": "string"},
                                         "role": {"type": "string"}, "handoff": {}}}}}}})
async def events(request: Request, signed: Signed = Depends(signed_in)) -> StreamingResponse:
    """Server-sent events: which conversation changed (a message stored or updated, a handoff)."""
    return StreamingResponse(_stream(request, signed, request.query_params.get("conversation")),
                             media_type="text/event-stream", headers={"x-accel-buffering": "no"})


async def _stream(request: Request, signed: Signed, only: str | None) -> AsyncIterator[str]:
    feed = signed.services.live_feed
    assert feed is not None
    loop = asyncio.get_running_loop()
    # then the browser reconnects at once (and re-reads the page part): SWITCHBOARD_CONSOLE_EVENTS_LIFE_S
    ends = loop.time() + signed.services.settings.console_events_life_s
    async with feed.listen() as queue:
        yield "retry: 250\n: connected\n\n"
        while not await request.is_disconnected() and loop.time() < ends:
            try:
                event = await asyncio.wait_for(queue.get(), min(KEEP_ALIVE_S, max(0.01, ends - loop.time())))
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if only and event.get("conversation_id") != only:
                continue
            change = {k: event.get(k) for k in ("conversation_id", "message_id", "role", "handoff") if k in event}
            yield f"data: {json.dumps(change)}\n\n"


async def _view(request: Request, signed: Signed, conversation_id: str) -> dict:
    services = signed.services
    desk = services.desk
    assert desk is not None
    conversation = await desk.conversation(conversation_id)
    messages = await services.store.conversation_messages(conversation_id)
    traces = await services.store.conversation_traces(conversation_id)
    by_agent = {t.agent_message_id: t for t in traces if t.agent_message_id}
    silent = {t.user_message_id: t for t in traces if t.suppressed}
    persona = (await services.store.get_personas([conversation.persona_id]))[0]
    handoff = await desk.state(conversation_id)
    templates, templates_error = [], None
    if desk.has_templates(conversation):  # WhatsApp: what re-opens the conversation past its 24-hour window
        try:
            templates = await desk.templates(conversation_id)
        except GatewayError as exc:
            templates_error = exc.message
    outcomes = await services.insight.outcomes.of(conversation_id) if services.insight is not None else []
    return {
        "outcomes": outcomes,
        "has_templates": desk.has_templates(conversation), "templates": templates,
        "templates_error": templates_error,
        "conversation": conversation, "persona": persona, "handoff": handoff,
        "entries": [_entry(m, by_agent, silent) for m in messages],
        "cannot_hand_off": desk.can_hand_off(conversation),
        "mine": handoff is not None and handoff.status == "human" and handoff.operator == signed.operator.username,
    }


def _entry(message: Message, by_agent: dict[str, TurnTrace], silent: dict[str, TurnTrace]) -> dict:
    trace = by_agent.get(message.id) if message.role is Role.AGENT else silent.get(message.id)
    return {"message": message, "trace": trace, "trace_view": _trace_view(trace) if trace else None}


def _trace_view(trace: TurnTrace) -> dict:
    retrieval = trace.retrieval
    selected = set(retrieval.selected) if retrieval else set()
    by = SELECTED_BY.get(retrieval.strategy or "", "fusion") if retrieval else ""
    return {
        "candidates": [(c.source, c.score, c.source in selected) for c in (retrieval.candidates if retrieval else [])],
        "selected_by": by,
        "sections": sorted(trace.sections.items()),
    }


@router.get("/{conversation_id}")
async def conversation(conversation_id: str, request: Request, signed: Signed = Depends(signed_in)) -> Response:
    try:
        view = await _view(request, signed, conversation_id)
    except NotFound:
        return page(request, "message.html", signed, 404, heading="No such conversation",
                    message="It may have been removed.", back=f"{PREFIX}/conversations")
    if request.query_params.get("fragment") == "transcript":
        return TEMPLATES.TemplateResponse(request, "transcript.html", {**view, "signed": signed})
    return page(request, "conversation.html", signed, **view, notice=request.query_params.get("done"))


async def _act(request: Request, signed: Signed, conversation_id: str, action) -> Response:
    await check_csrf(request, signed)
    try:
        done = await action()
    except NotFound:
        return page(request, "message.html", signed, 404, heading="No such conversation",
                    message="It may have been removed.", back=f"{PREFIX}/conversations")
    except GatewayError as exc:  # refused (a phone call, someone else's handoff, an empty reply): say why
        form = await request.form()
        view = await _view(request, signed, conversation_id)
        return page(request, "conversation.html", signed, 422, **view,
                    error=exc.message, typed=str(form.get("reply", "")))
    return RedirectResponse(f"{PREFIX}/conversations/{conversation_id}?done={notice(signed, done.replace('+', ' '))}",
                            status_code=303)


@router.post("/{conversation_id}/{action}")
async def handoff_action(conversation_id: str, action: str, request: Request,
                         signed: Signed = Depends(signed_in)) -> Response:
    """"Take over", "Send" (a reply), "Send template" and "Hand back": every operator may, for any conversation."""
    desk, operator = signed.services.desk, signed.operator.username
    assert desk is not None

    async def act() -> str:
        if action == "take-over":
            await desk.take_over(conversation_id, operator)
            return "taken+over"
        if action == "hand-back":
            await desk.hand_back(conversation_id, operator)
            return "handed+back"
        form = await request.form()
        if action == "template":
            name, _, language = str(form.get("template", "")).partition("|")
            message = await desk.send_template(conversation_id, operator, name, language)
        else:
            message = await desk.send(conversation_id, operator, str(form.get("reply", "")))
        return "sent" if message.delivery and message.delivery.value == "delivered" else "not+delivered"

    if action not in ("take-over", "hand-back", "reply", "template"):
        return page(request, "message.html", signed, 404, heading="No such action", message=action,
                    back=f"{PREFIX}/conversations/{conversation_id}")
    return await _act(request, signed, conversation_id, act)

"""An OpenAI-compatible face for agents: ``POST /v1/chat/completions`` and ``GET /v1/models``, so any
OpenAI client or chat UI can talk to an agent with an API key.

``model`` is the agent's ``name`` (its latest version) or ``name@<version id>`` (pinned). ``stream``
answers server-sent ``chat.completion.chunk`` events ending with ``data: [DONE]`` (with
``stream_options.include_usage``, a usage chunk before it). ``X-Session-ID`` (a UUID) or ``user``
keeps memory on the server. The caller's ``system`` messages are ignored: the agent's own
``systemPrompt`` applies. The sources used come in an extra ``sources`` field standard clients ignore.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from gateway.agents.runner import InvokeResult
from gateway.core.errors import BadRequest
from gateway.http.agents import session_of
from gateway.http.auth import bearer_token, services_of
from gateway.http.errors import failure
from gateway.http.json_body import JSONBodyRoute, read_json
from gateway.http.responses import json_body

log = logging.getLogger(__name__)
router = APIRouter(route_class=JSONBodyRoute)
SESSIONS = uuid.UUID("5b1d6c1e-8a4f-4c0e-9d55-0a6f3c2b7e10")  # namespace for sessions named by ``user``


def _sources(result: InvokeResult) -> list[dict]:
    return [{"doc_id": s.doc_id, "chunk_id": s.chunk_id, "score": s.score, "text": s.text} for s in result.sources]


def _usage(result: InvokeResult) -> dict:
    return result.usage.model_dump()


@router.get("/v1/models")
async def models(request: Request) -> dict:
    services = services_of(request)
    record = await services.api_keys.identify(bearer_token(request))
    names = []
    for agent_id in record.agents:
        try:
            names.append(await services.agents.get(agent_id))
        except Exception:  # a deleted agent is simply not listed
            continue
    return {"object": "list", "data": [
        {"id": a.name, "object": "model", "created": int(a.created_at.timestamp()), "owned_by": "switchboard"}
        for a in names]}


_COMPLETION_REQUEST = json_body({"type": "object", "required": ["model", "messages"], "properties": {
    "model": {"type": "string", "description": "The agent's name, optionally @version"},
    "messages": {"type": "array", "items": {"type": "object"}}, "stream": {"type": "boolean"},
    "user": {"type": "string"}}})
_COMPLETION = {200: {"description": "A chat.completion; with stream, server-sent events of chunks", "content": {
    "application/json": {"schema": {"type": "object"}},
    # each event's data: a chat.completion.chunk, and "[DONE]" last
    "text/event-stream": {"schema": {"anyOf": [{"type": "object"}, {"type": "string", "enum": ["[DONE]"]}]}}}}}


@router.post("/v1/chat/completions", openapi_extra=_COMPLETION_REQUEST, responses=_COMPLETION)
async def chat_completions(request: Request):
    services = services_of(request)
    body: Any = await read_json(request)
    if not isinstance(body, dict) or not isinstance(body.get("model"), str) or not isinstance(body.get("messages"),
                                                                                            list):
        raise BadRequest('body: {"model": "<agent name>", "messages": [...]}')
    name, _, version_id = body["model"].partition("@")
    agent = await services.agents.by_name(name)
    await services.api_keys.authorize(bearer_token(request), agent.id)
    version = await services.agents.resolve(agent.id, version_id or "latest")
    session = session_of(request)
    if session is None and isinstance(body.get("user"), str) and body["user"]:
        session = str(uuid.uuid5(SESSIONS, f"{agent.id}:{body['user']}"))
    messages = [{"role": m.get("role"), "content": _text(m.get("content"))} for m in body["messages"]
                if isinstance(m, dict) and m.get("role") in ("user", "assistant")]
    config = version.definition.config
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    if not body.get("stream"):
        result = await services.agent_runner.invoke(version, config, messages, session)
        return {"id": completion_id, "object": "chat.completion", "created": result.created_at, "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": result.text},
                             "finish_reason": "stop"}],
                "usage": _usage(result), "sources": _sources(result)}
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    return StreamingResponse(_events(services, version, config, messages, session, completion_id, body["model"],
                                     include_usage), media_type="text/event-stream")


def _text(content: Any) -> str:
    """Plain text, or the text parts of OpenAI's content-part list."""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else ""


async def _events(services, version, config, messages, session, completion_id: str, model: str,
                  include_usage: bool) -> AsyncIterator[str]:
    queue: asyncio.Queue[Any] = asyncio.Queue()

    def chunk(delta: dict, finish: str | None = None, **extra) -> str:
        return "data: " + json.dumps({"id": completion_id, "object": "chat.completion.chunk",
                                      "created": int(time.time()), "model": model,
                                      "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra},
                                     ensure_ascii=False) + "\n\n"

    async def delta(text: str) -> None:
        await queue.put(("delta", text))

    async def run() -> None:
        try:
            await queue.put(("done", await services.agent_runner.invoke(version, config, messages, session,
                                                                        on_delta=delta)))
        except Exception as exc:  # after the 200: an error event, then the end of the stream
            status, kind, message = failure(exc)
            if status == 500:
                log.exception("chat completion stream failed")
            await queue.put(("error", {"error": {"message": message, "type": kind, "code": status}}))

    task = asyncio.create_task(run())
    try:
        yield chunk({"role": "assistant", "content": ""})
        while True:
            kind, item = await queue.get()
            if kind == "delta":
                yield chunk({"content": item})
                continue
            if kind == "error":
                yield "data: " + json.dumps(item) + "\n\n"
            else:
                yield chunk({}, "stop", sources=_sources(item))
                if include_usage:
                    yield "data: " + json.dumps({"id": completion_id, "object": "chat.completion.chunk",
                                                 "created": item.created_at, "model": model, "choices": [],
                                                 "usage": _usage(item)}) + "\n\n"
            yield "data: [DONE]\n\n"
            return
    finally:
        if not task.done():
            task.cancel()

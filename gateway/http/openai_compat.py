"""An OpenAI-compatible face for agents: ``POST /v1/chat/completions`` and ``GET /v1/models``, so any
OpenAI client or chat UI can talk to an agent with an API key.

``model`` is the agent's ``name`` (its latest version) or ``name@<version id>`` (pinned). ``stream``
answers server-sent ``chat.completion.chunk`` events ending with ``data: [DONE]`` (with
``stream_options.include_usage``, a usage chunk before it). ``X-Session-ID`` (a UUID) or ``user``
keeps memory on the server, within the caller's API key (``gateway.agents.scope``). The caller's
``system`` messages are ignored: the agent's own ``systemPrompt`` applies; ``tools`` and a
non-text ``response_format`` are refused (400 naming the field), sampling fields are the agent's.
The sources used come in an extra ``sources`` field standard clients ignore.

The key is checked before the agent is looked up, and an agent the key may not call is as unknown
as one that does not exist (404, ``model_not_found``). Errors are OpenAI's ``{"error": {"message",
"type", "param", "code"}}`` (``gateway.http.openai_errors``), in a stream's error event too.
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
from pydantic import BaseModel, ConfigDict, ValidationError

from gateway.agents.api_keys import ApiKey
from gateway.agents.definitions import AgentDefinition
from gateway.agents.invoker import InvokeResult, calling_key
from gateway.agents.scope import api_session
from gateway.core.errors import BadRequest, NotFound
from gateway.http.agents import session_of
from gateway.http.auth import bearer_token, services_of
from gateway.http.json_body import read_json
from gateway.http.openai_errors import ERRORS, FieldRefused, ModelNotFound, OpenAIRoute, error_body
from gateway.http.responses import json_body
from gateway.services import Services

log = logging.getLogger(__name__)
router = APIRouter(route_class=OpenAIRoute, responses=ERRORS)

# Fields that would change what the answer is, which an agent cannot honour: refused, never dropped.
_TOOLS = "the agent answers from its own knowledge and retrieval tool; it cannot call tools of yours"
_REFUSED = {"tools": _TOOLS, "functions": _TOOLS, "function_call": _TOOLS,
            "audio": "the agent answers in text only"}


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    include_usage: bool | None = None


class ChatRequest(BaseModel):
    """What we read of a chat completion request. Sampling fields (``temperature``, ``max_tokens``…) are
    accepted and left to the agent's ``inferenceConfig``; those in ``_REFUSED`` are refused (400)."""

    model_config = ConfigDict(extra="allow", strict=True)

    model: str
    messages: list[Any]
    stream: bool | None = None  # null, as some clients send for "not given", is false
    stream_options: StreamOptions | None = None
    user: str | None = None
    n: int | None = None

    @classmethod
    def parse(cls, body: Any) -> ChatRequest:
        if not isinstance(body, dict):
            raise BadRequest('body: {"model": "<agent name>", "messages": [...]}')
        for field, why in _REFUSED.items():
            if body.get(field) not in (None, []):
                raise FieldRefused(field, f"not supported: {why}")
        if body.get("tool_choice") not in (None, "none", "auto"):
            raise FieldRefused("tool_choice", f"not supported: {_TOOLS}")
        response_format = body.get("response_format")
        if response_format is not None and response_format != {"type": "text"}:
            raise FieldRefused("response_format", "not supported: the agent answers in text shaped by its own "
                                                  "system prompt (only {\"type\": \"text\"} is accepted)")
        try:
            request = cls.model_validate(body, strict=True)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "body"
            raise FieldRefused(where, first["msg"]) from None
        if request.n not in (None, 1):
            raise FieldRefused("n", "an agent gives one answer per request (n must be 1)")
        return request


def _sources(result: InvokeResult) -> list[dict]:
    return [{"doc_id": s.doc_id, "chunk_id": s.chunk_id, "score": s.score, "text": s.text} for s in result.sources]


def _handoff(result: InvokeResult) -> dict:
    """Extra fields standard clients ignore: the conversation is held for an operator (the content is
    empty), and what operators wrote since the caller's last call."""
    extra: dict = {}
    if result.held:
        extra["held"] = result.held
    if result.operator_replies:
        extra["operator_replies"] = [{"text": r.text, "author": r.author, "created": r.created_at}
                                     for r in result.operator_replies]
    return extra


def _usage(result: InvokeResult) -> dict:
    return result.usage.model_dump()


def _model(agent: AgentDefinition) -> dict:
    return {"id": agent.name, "object": "model", "created": int(agent.created_at.timestamp()),
            "owned_by": "switchboard"}


async def _callable(services: Services, record: ApiKey, model: str) -> AgentDefinition:
    """The agent ``model`` names (``name`` or ``name@version``) if this key may call it; otherwise the
    same 404 whether the agent exists or not, so a key cannot list other keys' agents."""
    try:
        agent = await services.agents.find(model.partition("@")[0])
    except NotFound:
        raise ModelNotFound(model) from None
    if agent.id not in record.agents:
        raise ModelNotFound(model)
    return agent


@router.get("/v1/models")
async def models(request: Request) -> dict:
    services = services_of(request)
    record = await services.api_keys.identify(bearer_token(request))
    agents = []
    for agent_id in record.agents:
        try:
            agents.append(await services.agents.get(agent_id))
        except NotFound:  # a deleted agent is simply not listed
            continue
    return {"object": "list", "data": [_model(a) for a in agents]}


@router.get("/v1/models/{model}")
async def model(model: str, request: Request) -> dict:
    services = services_of(request)
    record = await services.api_keys.identify(bearer_token(request))
    agent = await _callable(services, record, model)
    if "@" in model:
        await services.agents.resolve(agent.id, model.partition("@")[2])
    return {**_model(agent), "id": model}


_COMPLETION_REQUEST = json_body({"type": "object", "required": ["model", "messages"], "properties": {
    "model": {"type": "string", "description": "The agent's name, optionally @version"},
    "messages": {"type": "array", "items": {"type": "object"}}, "stream": {"type": "boolean"},
    "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
    "user": {"type": "string", "description": "Your end user's id: with the same API key, the same conversation"}}})
_COMPLETION = {200: {"description": "A chat.completion; with stream, server-sent events of chunks", "content": {
    "application/json": {"schema": {"type": "object"}},
    # each event's data: a chat.completion.chunk, and "[DONE]" last
    "text/event-stream": {"schema": {"anyOf": [{"type": "object"}, {"type": "string", "enum": ["[DONE]"]}]}}}}}


@router.post("/v1/chat/completions", openapi_extra=_COMPLETION_REQUEST, responses=_COMPLETION)
async def chat_completions(request: Request):
    services = services_of(request)
    record = await services.api_keys.identify(bearer_token(request))  # before anything says which agents exist
    calling_key.set(record.id)  # the invocation's tokens and cost count under this key (insight)
    body = ChatRequest.parse(await read_json(request))
    agent = await _callable(services, record, body.model)
    await services.api_keys.admit(record, agent.id)
    version = await services.agents.resolve(agent.id, body.model.partition("@")[2] or "latest", agent)
    session = api_session(agent.id, record.id, session_of(request))
    if session is None and body.user:
        session = api_session(agent.id, record.id, body.user, kind="user")
    messages = [{"role": m.get("role"), "content": _text(m.get("content"))} for m in body.messages
                if isinstance(m, dict) and m.get("role") in ("user", "assistant")]
    config = version.definition.config
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    if not body.stream:
        result = await services.invoker.invoke(version, config, messages, session, caller=body.user)
        # The id is the turn's, so POST /v1/feedback can rate this answer by it (insight, issue 41).
        return {"id": f"chatcmpl-{result.turn_id}", "object": "chat.completion", "created": result.created_at,
                "model": body.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": result.text},
                             "finish_reason": "stop"}],
                "usage": _usage(result), "sources": _sources(result), **_handoff(result)}
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    return StreamingResponse(_events(services, version, config, messages, session, completion_id, body.model,
                                     include_usage, body.user), media_type="text/event-stream")


def _text(content: Any) -> str:
    """Plain text, or the text parts of OpenAI's content-part list."""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else ""


async def _events(services, version, config, messages, session, completion_id: str, model: str,
                  include_usage: bool, caller: str | None) -> AsyncIterator[str]:
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
            await queue.put(("done", await services.invoker.invoke(version, config, messages, session,
                                                                        on_delta=delta, caller=caller)))
        except Exception as exc:  # after the 200: an error event, then the end of the stream
            await queue.put(("error", error_body(exc)[1]))

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
                yield chunk({}, "stop", sources=_sources(item), **_handoff(item))
                if include_usage:
                    yield "data: " + json.dumps({"id": completion_id, "object": "chat.completion.chunk",
                                                 "created": item.created_at, "model": model, "choices": [],
                                                 "usage": _usage(item)}) + "\n\n"
            yield "data: [DONE]\n\n"
            return
    finally:
        if not task.done():
            task.cancel()

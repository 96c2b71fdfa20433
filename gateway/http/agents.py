"""The agent API: agents and versions (admin token); describe, invoke and invoke-stream (an API key
scoped to the agent, ``gateway.http.agent_auth``). API keys are managed in ``gateway.http.api_keys``.

Every ``{agent_id}`` may be the agent's id or its name. Errors are ``{"status", "error", "message"}``;
a refused agent definition or invocation is a 400, an invocation naming an unknown field a 422.
``invoke`` answers with an ``id`` (the turn's, as the console's trace shows it) and ``usage``.
``invoke-stream`` answers newline-delimited JSON: ``{"object": "response.delta", "text"}`` objects
whose texts concatenate to the answer (with ``{"object": "response.tool_call", ...}`` and
``{"object": "response.tool_result", ...}`` as the agent's tools run), then one
``{"object": "response.completed", ...}`` with ``customOutputs``. ``invoke``'s ``output`` has each tool
call as a ``function_call`` item and its result as a ``function_call_output`` item before the message.
A failure after the stream began cannot change the 200 already sent: the stream
ends with ``{"object": "error", "status", "error", "message"}`` instead.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse

from gateway.agents.definitions import AgentConfig, AgentCreate, AgentVersion
from gateway.agents.guardrails import CATALOG
from gateway.agents.invocation import OVERRIDES, Invocation, configured
from gateway.agents.invoker import InvokeResult
from gateway.agents.scope import api_session
from gateway.agents.store import UnknownTool
from gateway.core.errors import BadRequest, InvalidInput
from gateway.core.models import ToolCallTrace
from gateway.http.agent_auth import authorize_caller
from gateway.http.auth import bearer_token, require_admin, services_of
from gateway.http.errors import failure
from gateway.http.json_body import AdminRoute, JSONBodyRoute, read_json
from gateway.http.responses import json_body
from gateway.services import Services
from gateway.turn.responders import ToolEvent

log = logging.getLogger(__name__)
admin = APIRouter(route_class=AdminRoute)
callers = APIRouter(route_class=JSONBodyRoute)


def _agent_json(version: AgentVersion) -> dict:
    return {**version.definition.model_dump(by_alias=True, mode="json"), "version_id": version.version_id}


async def _as_400(coro):
    try:
        return await coro
    except UnknownTool:
        raise
    except InvalidInput as exc:
        raise BadRequest(exc.message) from None


async def _id(services: Services, agent_ref: str) -> str:
    """Every path's ``{agent_id}`` may be the agent's id or its name (an id wins over a name)."""
    return (await services.agents.find(agent_ref)).id


# -- agents (admin) ------------------------------------------------------------------------------
@admin.get("/v1/agents")
async def list_agents(services: Services = Depends(require_admin)) -> dict:
    return {"agents": [a.model_dump(by_alias=True, mode="json") for a in await services.agents.list()]}


@admin.post("/v1/agents", status_code=201, openapi_extra=json_body(AgentCreate))
async def create_agent(request: Request, services: Services = Depends(require_admin)) -> dict:
    data = await read_json(request)
    if not isinstance(data, dict):
        raise BadRequest("body: an agent definition object")
    return _agent_json(await _as_400(services.agents.create(data)))


@admin.get("/v1/agents/{agent_id}")
async def get_agent(agent_id: str, services: Services = Depends(require_admin)) -> dict:
    return (await services.agents.find(agent_id)).model_dump(by_alias=True, mode="json")


@admin.patch("/v1/agents/{agent_id}",
             openapi_extra=json_body({"type": "object", "description": "The fields of the definition to change"}))
async def patch_agent(agent_id: str, request: Request, services: Services = Depends(require_admin)) -> dict:
    data = await read_json(request)
    if not isinstance(data, dict):
        raise BadRequest("body: an object of the fields to change")
    return _agent_json(await _as_400(services.agents.patch(await _id(services, agent_id), data)))


@admin.delete("/v1/agents/{agent_id}", status_code=204)
async def delete_agent(agent_id: str, services: Services = Depends(require_admin)) -> Response:
    await services.agents.delete(await _id(services, agent_id))
    return Response(status_code=204)


@admin.get("/v1/agents/{agent_id}/versions")
async def list_versions(agent_id: str, services: Services = Depends(require_admin)) -> dict:
    versions = await services.agents.versions(await _id(services, agent_id))
    return {"versions": [v.model_dump(by_alias=True, mode="json") for v in versions]}


@admin.get("/v1/agents/{agent_id}/versions/{version_id}")
async def get_version(agent_id: str, version_id: str, services: Services = Depends(require_admin)) -> dict:
    return (await services.agents.resolve(await _id(services, agent_id), version_id)).model_dump(by_alias=True,
                                                                                             mode="json")


@callers.get("/v1/guardrails")
async def guardrails(request: Request) -> dict:
    """What an agent's ``guardrails`` (or an invocation's) may name; any API key or the admin token."""
    services = services_of(request)
    token = bearer_token(request)
    admin_token = services.settings.admin_token
    if not (admin_token and token and hmac.compare_digest(token.encode(), admin_token.get_secret_value().encode())):
        await services.api_keys.identify(token)
    return {"guardrails": [{"name": g.name, "description": g.description} for g in CATALOG]}


# -- invoke (caller keys) ------------------------------------------------------------------------
def session_of(request: Request) -> str | None:
    """The caller's ``X-Session-ID`` as it sent it (a UUID); ``scope.api_session`` makes it the key's own."""
    raw = request.headers.get("x-session-id")
    if raw is None:
        return None
    try:
        return str(uuid.UUID(raw))
    except ValueError:
        raise BadRequest("X-Session-ID: must be a UUID (you make and keep it; any UUID will do)") from None


async def prepared(request: Request, agent_ref: str, version_id: str) -> tuple[Services, AgentVersion, AgentConfig,
                                                                                  list[dict], str | None]:
    """Authorize the caller's key, read the body, resolve the version and apply the invocation's overrides.

    The session is the caller's within its key (``scope.api_session``) and the overrides only narrow
    (``invocation.configured``): whatever runs the turn gets these, never the raw header or body."""
    services = services_of(request)
    caller = await authorize_caller(request, agent_ref, version_id)
    session = api_session(caller.agent.id, caller.key.id, session_of(request))
    call = Invocation.parse(await read_json(request))
    version = caller.version
    if version is None or version.agent_id != caller.agent.id:  # resolve says why (404)
        version = await services.agents.resolve(caller.agent.id, version_id, caller.agent)
    return services, version, configured(version.definition.config, call), call.messages, session


@callers.get("/v1/agents/{agent_id}/versions/{version_id}/describe")
async def describe(agent_id: str, version_id: str, request: Request) -> dict:
    """What a caller's key may see of a version (``latest`` or an id): enough to pin it."""
    caller = await authorize_caller(request, agent_id)
    version = await services_of(request).agents.resolve(caller.agent.id, version_id)
    config = version.definition.config.model_dump(by_alias=True, mode="json")
    return {"agentId": version.agent_id, "name": version.definition.name, "versionId": version.version_id,
            "createdAt": version.created_at.isoformat(), "config": config}


def operator_replies_json(result: InvokeResult) -> list[dict]:
    return [{"text": r.text, "author": r.author, "createdAt": r.created_at} for r in result.operator_replies]


def response_json(result: InvokeResult, *, completed: bool = False) -> dict:
    """``status`` is ``held`` (and ``output`` empty) when an operator has the conversation: the model was
    not asked; ``customOutputs.operatorReplies`` carries what operators wrote since the caller's last call."""
    custom = {"sourceNodes": [{"docId": s.doc_id, "chunkId": s.chunk_id, "score": s.score, "text": s.text,
                               "n": s.n, "title": s.title, "url": s.url, "cited": s.cited}
                              for s in result.sources], "ragMode": result.rag_mode, **result.outputs,
              "operatorReplies": operator_replies_json(result)}
    if result.held:
        custom["held"] = result.held
    base = {"object": "response.completed" if completed else "response", "createdAt": result.created_at,
            "model": result.model, "id": result.turn_id, "status": "held" if result.held else "completed"}
    if completed:
        return {**base, "customOutputs": custom, "usage": result.usage.model_dump()}
    output = [] if result.held else [*tool_items(result.tool_calls), {
        "type": "message", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": result.text}]}]
    return {**base, "output": output, "customOutputs": custom, "usage": result.usage.model_dump()}


def tool_items(calls: list[ToolCallTrace]) -> list[dict]:
    """The turn's tool calls as output items (OpenAI Responses' ``function_call`` / ``function_call_output``)."""
    items: list[dict] = []
    for n, call in enumerate(calls):
        call_id = f"call_{n}"
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        items.append({"type": "function_call", "status": "completed" if call.error is None else "incomplete",
                      "call_id": call_id, "name": call.name, "arguments": arguments})
        items.append({"type": "function_call_output", "call_id": call_id,
                      "output": call.result if call.error is None else json.dumps({"error": call.error})})
    return items


def tool_event_json(event: ToolEvent) -> dict:
    if event.kind == "call":
        return {"object": "response.tool_call", "callId": event.call_id, "name": event.name,
                "arguments": event.arguments}
    return {"object": "response.tool_result", "callId": event.call_id, "name": event.name, "output": event.output,
            "error": event.error, "ms": event.ms}


_INVOKE = json_body({"type": "object", "required": ["messages"], "additionalProperties": False, "properties": {
    "messages": {"type": "array", "items": {"type": "object", "properties": {
        "role": {"type": "string", "enum": ["user", "assistant"]}, "content": {"type": "string"}}}},
    "guardrails": {"type": "array", "items": {"type": "string"}},
    **{name: {"description": "Overrides the version's config for this call"} for name in OVERRIDES}}})
_SESSION = {"parameters": [{"name": "X-Session-ID", "in": "header", "required": False,
                            "schema": {"type": "string", "format": "uuid"},
                            "description": "A UUID you keep: calls with it and the same API key share the "
                                           "conversation's memory (another key's same UUID is another session)"}]}


@callers.post("/v1/agents/{agent_id}/versions/{version_id}/invoke", openapi_extra={**_INVOKE, **_SESSION})
async def invoke(agent_id: str, version_id: str, request: Request) -> dict:
    services, version, config, messages, session = await prepared(request, agent_id, version_id)
    result = await services.invoker.invoke(version, config, messages, session)
    return response_json(result)


@callers.post("/v1/agents/{agent_id}/versions/{version_id}/invoke-stream", openapi_extra={**_INVOKE, **_SESSION},
              response_class=StreamingResponse, responses={200: {"description": "One JSON object a line", "content": {
                  "application/x-ndjson": {"schema": {"type": "string"}}}}})
async def invoke_stream(agent_id: str, version_id: str, request: Request) -> StreamingResponse:
    services, version, config, messages, session = await prepared(request, agent_id, version_id)
    return StreamingResponse(_ndjson(services, version, config, messages, session),
                             media_type="application/x-ndjson")


async def _ndjson(services: Services, version: AgentVersion, config: AgentConfig, messages: list[dict],
                  session: str | None) -> AsyncIterator[str]:
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def delta(text: str) -> None:
        await queue.put({"object": "response.delta", "text": text})

    async def tool(event: ToolEvent) -> None:
        await queue.put(tool_event_json(event))

    async def run() -> None:
        try:
            result = await services.invoker.invoke(version, config, messages, session, on_delta=delta, on_tool=tool)
            await queue.put(response_json(result, completed=True))
        except Exception as exc:  # after the 200: the stream's last object says what went wrong
            status, kind, message = failure(exc)
            if status == 500:
                log.exception("invoke-stream failed")
            await queue.put({"object": "error", "status": status, "error": kind, "message": message})
        await queue.put(None)

    task = asyncio.create_task(run())
    try:
        while (item := await queue.get()) is not None:
            yield json.dumps(item, ensure_ascii=False) + "\n"
    finally:
        if not task.done():
            task.cancel()

"""Tools (admins only): the tool sources (MCP servers, OpenAPI documents) with their status and tools —
add one, refresh it, delete it, try one of its tools with JSON arguments — and, per agent, which tools it
may call and which wait for the customer's yes (``config.tools``, a new version of the agent).

The same services as ``/api/tool-sources`` and ``/v1/agents``: what is refused there is refused here, with
the same sentence next to the form. Header values are write-only (a password field; the pages show them
masked), and a tried tool's answer has the source's secrets masked.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from admin_ui.render import page
from admin_ui.security import PREFIX, Signed, admin_only, check_csrf
from gateway.core.errors import GatewayError, InvalidInput
from gateway.tools.service import ToolSources
from gateway.tools.trial import try_tool

router = APIRouter(prefix=f"{PREFIX}/tools")

DONE = {"added": "Tool source added.", "refreshed": "Listed again.", "deleted": "Tool source deleted.",
        "saved": "Tools saved: a new version of the agent."}
LABELS = {"mcp": "MCP server", "openapi": "OpenAPI source", "stdio": "Local command (stdio MCP)"}


def _sources(signed: Signed) -> ToolSources:
    assert signed.services.tool_sources is not None
    return signed.services.tool_sources


async def _agents(signed: Signed) -> list:
    assert signed.services.agents is not None
    return await signed.services.agents.list()


async def _list(request: Request, signed: Signed, status_code: int = 200, **context) -> Response:
    return page(request, "tools.html", signed, status_code, sources=[s.public() for s in await _sources(signed).list()],
                agents=await _agents(signed), labels=LABELS, key_ready=_sources(signed).store.box.ready, **context)


def _headers(form) -> dict[str, str]:
    name, value = str(form.get("header_name", "")).strip(), str(form.get("header_value", ""))
    return {name: value} if name and value else {}


@router.get("")
async def tools(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    return await _list(request, signed, outcome=DONE.get(request.query_params.get("done", "")))


@router.post("")
async def add(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    kind = str(form.get("kind", ""))
    data = {"kind": kind, "name": str(form.get("name", "")).strip(), "url": str(form.get("url", "")).strip(),
            "headers": _headers(form)}
    if kind == "openapi":
        data["operations"] = [op.strip() for op in str(form.get("operations", "")).replace(",", " ").split()]
    try:
        source = await _sources(signed).create(data)
    except GatewayError as exc:  # shown next to the form; what was typed is kept, the header's value is not
        typed = {"kind": kind, "name": data["name"], "url": data["url"],
                 "header_name": str(form.get("header_name", "")), "operations": str(form.get("operations", ""))}
        return await _list(request, signed, 422, error=exc.message, typed=typed)
    return RedirectResponse(f"{PREFIX}/tools/sources/{source.id}?done=added", status_code=303)


async def _detail(source_id: str, request: Request, signed: Signed, status_code: int = 200, **context) -> Response:
    source = await _sources(signed).get(source_id)
    return page(request, "tool_source.html", signed, status_code, s=source.public(), labels=LABELS, **context)


@router.get("/sources/{source_id}")
async def detail(source_id: str, request: Request, signed: Signed = Depends(admin_only)) -> Response:
    return await _detail(source_id, request, signed, outcome=DONE.get(request.query_params.get("done", "")))


@router.post("/sources/{source_id}")
async def change(source_id: str, request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    action = str((await request.form()).get("action", ""))
    try:
        if action == "refresh":
            await _sources(signed).refresh(source_id)
            return RedirectResponse(f"{PREFIX}/tools/sources/{source_id}?done=refreshed", status_code=303)
        if action == "delete":
            await _sources(signed).delete(source_id)
            return RedirectResponse(f"{PREFIX}/tools?done=deleted", status_code=303)
    except GatewayError as exc:
        return await _detail(source_id, request, signed, 422, error=exc.message)
    return await _detail(source_id, request, signed, 422, error=f"unknown action {action!r}")


@router.post("/sources/{source_id}/try")
async def try_a_tool(source_id: str, request: Request, signed: Signed = Depends(admin_only)) -> Response:
    """The tool called now, as a turn would call it; the page shows its answer (or error) under the form."""
    await check_csrf(request, signed)
    form = await request.form()
    tool, typed = str(form.get("tool", "")), str(form.get("arguments", "") or "{}")
    try:
        try:
            arguments = json.loads(typed)
        except ValueError as exc:
            raise InvalidInput(f"arguments: not JSON ({exc})") from None
        tried = await try_tool(_sources(signed), source_id, tool, arguments, signed.services.settings.tool_timeout_s)
    except GatewayError as exc:
        return await _detail(source_id, request, signed, 422, error=exc.message, tried_tool=tool, typed=typed)
    return await _detail(source_id, request, signed, tried=tried, tried_tool=tool, typed=typed)


@router.get("/agents/{agent_id}")
async def agent_tools(agent_id: str, request: Request, signed: Signed = Depends(admin_only)) -> Response:
    return await _agent_page(agent_id, request, signed, outcome=DONE.get(request.query_params.get("done", "")))


async def _agent_page(agent_id: str, request: Request, signed: Signed, status_code: int = 200,
                      **context) -> Response:
    assert signed.services.agents is not None
    agent = await signed.services.agents.get(agent_id)
    chosen = {t.name: t.confirm for t in agent.config.tools}
    sources = [s.public() for s in await _sources(signed).list()]
    return page(request, "agent_tools.html", signed, status_code, agent=agent, sources=sources, chosen=chosen,
                **context)


@router.post("/agents/{agent_id}")
async def save_agent_tools(agent_id: str, request: Request, signed: Signed = Depends(admin_only)) -> Response:
    """``use`` names the chosen tools (``crm.book_table``, ``crm.*``), ``confirm`` those that wait for a yes."""
    await check_csrf(request, signed)
    form = await request.form()
    confirm = {str(v) for v in form.getlist("confirm")}
    tools = [{"name": str(name), "confirm": str(name) in confirm} for name in form.getlist("use")]
    assert signed.services.agents is not None
    try:
        await signed.services.agents.patch(agent_id, {"config": {"tools": tools}})
    except GatewayError as exc:
        return await _agent_page(agent_id, request, signed, 422, error=exc.message)
    return RedirectResponse(f"{PREFIX}/tools/agents/{agent_id}?done=saved", status_code=303)

"""The agent served over MCP: ``/mcp`` (streamable HTTP, the official SDK's FastMCP, stateless).

A caller authenticates with an agent API key (``Authorization: Bearer sbk_...``); a request without
one, or with an unknown or revoked one, is a 401 before the MCP server reads it. The key's first
agent answers. Two tools:

- ``ask`` ``{"question", "session_id"?}``: the agent's answer through the same turn pipeline as the
  agent API's invoke (memory per key and session, limits, guardrails, handoff, the trace), with its
  sources;
- ``search_knowledge`` ``{"query", "top_k"?}``: knowledge-base chunks with source, title, text and
  score, from the agent's knowledge bases only.

Each tool call counts against the key's rate limit like an agent API call.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway.agents.scope import api_session
from gateway.agents.store import LATEST
from gateway.core.errors import Unauthorized
from gateway.http.agent_auth import Caller, authorize_caller
from gateway.http.auth import bearer_token
from gateway.services import Services

__all__ = ["MCP_PATH", "McpEndpoint"]

MCP_PATH = "/mcp"
_MAX_TOP_K = 20


async def _caller(ctx: Context) -> tuple[Services, Caller]:
    request = ctx.request_context.request
    if not isinstance(request, Request):
        raise Unauthorized("an API key is required: Authorization: Bearer sbk_...")
    services: Services = request.app.state.services
    record = await services.api_keys.authenticate(bearer_token(request))
    if record is None or not record.agents:
        raise Unauthorized("unknown or revoked API key")
    return services, await authorize_caller(request, record.agents[0])


def _server() -> FastMCP:
    # No DNS-rebinding check on Host: every request carries an API key, and behind a proxy the host is ours.
    server = FastMCP("switchboard", stateless_http=True, json_response=True, streamable_http_path=MCP_PATH,
                     log_level="WARNING",
                     transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))

    @server.tool(description="Ask the agent a question. Returns its answer and the knowledge-base sources it "
                             "used. Give the same session_id (a UUID you keep) to continue a conversation.")
    async def ask(question: str, ctx: Context, session_id: str | None = None) -> dict:
        services, caller = await _caller(ctx)
        version = caller.version or await services.agents.resolve(caller.agent.id, LATEST, caller.agent)
        session = api_session(caller.agent.id, caller.key.id, session_id)
        result = await services.invoker.invoke(version, version.definition.config,
                                               [{"role": "user", "content": question}], session)
        return {"answer": result.text, "turn_id": result.turn_id,
                "sources": [{"source": s.doc_id, "title": s.title, "score": s.score, "url": s.url}
                            for s in result.sources]}

    @server.tool(description="Search the agent's knowledge base. Returns the best chunks with source, title, "
                             "text and score.")
    async def search_knowledge(query: str, ctx: Context, top_k: int = 5) -> dict:
        services, caller = await _caller(ctx)
        assert services.knowledge is not None
        config = caller.agent.config
        found = await services.knowledge.search(query, k=max(1, min(top_k, _MAX_TOP_K)),
                                                kbs=config.knowledge_bases or None)
        return {"results": [{"source": h.topic.source, "title": h.topic.title, "text": h.topic.summary,
                             "score": round(h.score, 4)} for h in found.hits[:top_k]]}

    return server


class McpEndpoint:
    """The ASGI endpoint at ``/mcp``: the API key checked, then the SDK's streamable HTTP handler."""

    def __init__(self) -> None:
        self.server = _server()
        self.server.streamable_http_app()  # makes the session manager
        self.manager = self.server.session_manager

    def route(self) -> Route:
        return Route(MCP_PATH, endpoint=self, methods=["GET", "POST", "DELETE"])

    def running(self) -> AbstractAsyncContextManager[None]:
        """Held for the app's lifetime (the SDK's task group for requests)."""
        return self.manager.run()

    async def __call__(self, scope, receive, send) -> None:
        request = Request(scope)
        services: Services = request.app.state.services
        token = bearer_token(request)
        if not token or await services.api_keys.authenticate(token) is None:
            answer = JSONResponse({"status": 401, "error": "unauthorized",
                                   "message": "an agent API key is required: Authorization: Bearer sbk_..."},
                                  status_code=401, headers={"WWW-Authenticate": "Bearer"})
            await answer(scope, receive, send)
            return
        await self.manager.handle_request(scope, receive, send)

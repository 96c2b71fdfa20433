"""The OpenAPI side: read a document's operations as tools, and call one as an HTTP request.

Both go through the outbound guard (``GuardedTransport``: loopback and private addresses refused
unless ``SWITCHBOARD_OUTBOUND_ALLOW_HOSTS`` allows them, the answer's size capped) with the source's
headers. A call carries ``Idempotency-Key`` (the turn id and the call's index, as an MCP call carries
``_meta.idempotencyKey``), is sent once (no retries: the model reads the failure and decides), and
follows no redirects. A 2xx answer's body is the result; any other status is an error result with the
body's start, for the model to read.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import httpx

from gateway.core.outbound import OutboundPolicy, OutboundRefused, shown
from gateway.core.outbound_client import FetchFailed, FetchLimits, GuardedClient, GuardedTransport, OutboundBlocked
from gateway.core.outbound_decoding import OutboundUnreadable
from gateway.tools.mcp_client import LIST_TIMEOUT_S, MAX_ANSWER_BYTES, ToolServerError
from gateway.tools.model import Endpoint, ToolInfo, ToolSource
from gateway.tools.openapi_doc import OpenApiError, parse, read_tools
from gateway.turn.tools import ToolOutcome

__all__ = ["OpenApiClient"]

_USER_AGENT = "Switchboard/1.0 (tool call)"
_ERROR_BODY_CHARS = 1000


def _value(value: object) -> str:
    """A parameter's value in a URL or header: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _request(endpoint: Endpoint, arguments: dict) -> tuple[str, dict[str, str], dict[str, object]]:
    """The URL (path parameters filled in), the headers and the query parameters for a call."""
    taken = [*endpoint.parameters, *([endpoint.body] if endpoint.body else [])]
    unknown = sorted(set(arguments) - set(taken))
    if unknown:  # the model reads this and can call again with the right names; nothing is sent
        raise ToolServerError(f"unknown argument {', '.join(map(repr, unknown))}; this operation takes "
                              f"{', '.join(map(repr, taken)) or 'no arguments'}")
    url, headers, query = endpoint.url, {}, {}
    for name, where in endpoint.parameters.items():
        if name not in arguments:
            if where == "path":
                raise ToolServerError(f"the argument {name!r} is required (it is part of the path)")
            continue
        value = arguments[name]
        if where == "path":
            url = url.replace("{" + name + "}", quote(_value(value), safe=""))
        elif where == "header":
            headers[name] = _value(value)
        else:
            query[name] = [_value(v) for v in value] if isinstance(value, list) else _value(value)
    return url, headers, query


class OpenApiClient:
    def __init__(self, policy: OutboundPolicy, max_answer_bytes: int = MAX_ANSWER_BYTES) -> None:
        self.policy = policy
        self.max_answer_bytes = max_answer_bytes

    async def list_tools(self, source: ToolSource, timeout_s: float = LIST_TIMEOUT_S) -> list[ToolInfo]:
        """The document's operations that ``source.operations`` names, as tools (those it lacks are left out:
        the caller compares)."""
        fetcher = GuardedClient(self.policy, FetchLimits(timeout_s=timeout_s, max_bytes=self.max_answer_bytes,
                                                         retries=1),
                                user_agent=_USER_AGENT, subject="the OpenAPI document")
        try:
            fetched = await fetcher.request("GET", source.url, headers={
                "Accept": "application/json, application/yaml;q=0.9, text/yaml;q=0.9, */*;q=0.5", **source.headers})
        except OutboundRefused as exc:
            raise ToolServerError(exc.message) from None
        except FetchFailed as exc:
            reason = exc.reason + (": check the source's headers" if exc.status in (401, 403) else "")
            raise ToolServerError(f"{shown(source.url)}: {reason}") from None
        finally:
            await fetcher.aclose()
        try:
            doc = parse(fetched.body)
        except OpenApiError:
            kind = fetched.content_type or "no content type"
            raise ToolServerError(f"{shown(source.url)} did not answer JSON or YAML ({kind}): an OpenAPI 3 "
                                  "document in JSON or YAML is read") from None
        try:
            tools, _missing = read_tools(doc, fetched.url, source.name, source.operations)
        except OpenApiError as exc:
            raise ToolServerError(f"{shown(source.url)}: {exc}") from None
        return tools

    async def call(self, source: ToolSource, tool: str, arguments: dict, idempotency_key: str,
                   timeout_s: float = 60.0) -> ToolOutcome:
        info = next((t for t in source.tools if t.name == f"{source.name}.{tool}"), None)
        if info is None or info.endpoint is None:
            raise ToolServerError(f"{source.name} has no operation {tool!r}; refresh the source")
        endpoint = info.endpoint
        url, param_headers, query = _request(endpoint, arguments)
        headers = {**param_headers, **source.headers, "Idempotency-Key": idempotency_key, "User-Agent": _USER_AGENT,
                   "Accept": "application/json, text/plain;q=0.9, */*;q=0.5"}
        body = arguments.get(endpoint.body) if endpoint.body is not None else None
        http = httpx.AsyncClient(transport=GuardedTransport(self.policy, self.max_answer_bytes),
                                 follow_redirects=False, timeout=httpx.Timeout(timeout_s), trust_env=False)
        try:
            async with http:
                answer = await http.request(endpoint.method, url, params=query, headers=headers,
                                            json=body if endpoint.body is not None and body is not None else None)
        except OutboundBlocked as exc:
            raise ToolServerError(exc.refusal.message) from None
        except OutboundUnreadable as exc:
            raise ToolServerError(exc.describe(f"the answer of {shown(url)}")) from None
        except httpx.ConnectError:
            raise ToolServerError(f"{shown(url)} cannot be reached (connection refused or no route)") from None
        except httpx.TimeoutException:
            raise ToolServerError(f"{shown(url)} did not answer in time") from None
        except httpx.HTTPError as exc:
            raise ToolServerError(f"{shown(url)}: {type(exc).__name__}") from None
        text = answer.content.decode(answer.encoding or "utf-8", errors="replace")
        if 200 <= answer.status_code < 300:
            return ToolOutcome(text=text)
        return ToolOutcome(text="", error=f"{endpoint.method} {shown(url)} answered HTTP {answer.status_code}: "
                                          f"{text[:_ERROR_BODY_CHARS] or 'no body'}")

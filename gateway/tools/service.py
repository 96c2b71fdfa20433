"""Adding, changing, refreshing and removing tool sources; the tools an agent's ``config.tools`` names.

Refused input (an unknown kind, a bad name or URL, a URL the outbound guard refuses, headers with no
``SWITCHBOARD_SECRET_KEY`` to seal them, an OpenAPI operation the document does not have) stores
nothing. A server that cannot be reached, or does not speak MCP (or serve an OpenAPI 3 document), does
not lose the operator's work: the source is stored with the error in its status and no tools, to be
refreshed later.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.core.errors import Conflict, InvalidInput
from gateway.core.models import utcnow
from gateway.core.outbound import OutboundPolicy
from gateway.tools.mcp_client import McpClient, ToolServerError
from gateway.tools.model import NAME_PATTERN, Kind, OperationId, SourceClient, SourceStatus, ToolInfo, ToolSource
from gateway.tools.openapi_client import OpenApiClient
from gateway.tools.stdio_client import StdioClient
from gateway.tools.store import ToolSourceStore
from gateway.turn.llm import CallOptions
from gateway.turn.tools import ToolOutcome, ToolSpec, TurnTools

__all__ = ["HTTP_KINDS", "MAX_OPERATIONS", "MAX_TOOLS", "SourceCaller", "SourceCreate", "SourcePatch",
           "ToolSources"]

HTTP_KINDS = ("mcp", "openapi")  # what the API adds; a stdio source (a local command) only the CLI
MAX_OPERATIONS = 128  # as many as tools are offered

log = logging.getLogger(__name__)
MAX_TOOLS = 128  # OpenAI takes 128 tools per request; a server listing more keeps its first 128, and says so
TURN_LIST_TTL_S = 1.0  # turns reuse a listing of the sources this long (another replica's change: within 1 s)


class SourceCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str = "mcp"
    name: str = Field(pattern=NAME_PATTERN)
    url: str = Field(min_length=8, max_length=2000)
    headers: dict[str, str] = Field(default_factory=dict)
    # OpenAPI sources: the operationIds to offer as tools (an MCP server lists its own)
    operations: list[OperationId] = Field(default_factory=list, max_length=MAX_OPERATIONS)


class SourcePatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, pattern=NAME_PATTERN)
    url: str | None = Field(default=None, min_length=8, max_length=2000)
    headers: dict[str, str] | None = None  # replaces the stored headers (an empty object removes them)
    operations: list[OperationId] | None = Field(default=None, max_length=MAX_OPERATIONS)  # OpenAPI: replaces them


def _invalid(exc: ValidationError) -> InvalidInput:
    first = exc.errors()[0]
    where = ".".join(map(str, first["loc"])) or "body"
    if first["type"] == "string_pattern_mismatch" and where == "name":
        return InvalidInput("name: lower-case letters, digits, '_' and '-' (up to 40), no dots: the name "
                            "is the first part of its tools' names (crm → crm.book_table)")
    if first["type"] == "string_pattern_mismatch" and first["loc"][0] == "operations":
        return InvalidInput(f"{where}: {first['input']!r} is not an operationId (letters, digits, '_', '.', '-')")
    return InvalidInput(f"{where}: {first['msg']}")


def _operations(kind: str, operations: list[str]) -> None:
    if kind != "openapi":
        if operations:
            raise InvalidInput("operations: only an OpenAPI source has operations; an MCP server lists its tools")
        return
    if not operations:
        raise InvalidInput("operations: name the OpenAPI operations (operationId) to offer as tools, "
                           "e.g. [\"getOrder\"]")
    if len(set(operations)) != len(operations):
        raise InvalidInput("operations: an operation is named twice")


class ToolSources:
    def __init__(self, store: ToolSourceStore, client: McpClient, policy: OutboundPolicy,
                 openapi: OpenApiClient | None = None) -> None:
        self.clients: dict[Kind, SourceClient] = {"mcp": client, "openapi": openapi or OpenApiClient(policy),
                                                  "stdio": StdioClient()}
        self.store = store
        self.client = client
        self.policy = policy
        self._for_turns: tuple[float, dict[str, ToolSource]] | None = None  # (when, by name), for ``for_turn``

    async def list(self) -> list[ToolSource]:
        return await self.store.list()

    async def get(self, source_id: str) -> ToolSource:
        return await self.store.get(source_id)

    async def create(self, data: Any) -> ToolSource:
        if isinstance(data, dict) and (data.get("kind") == "stdio" or "command" in data):
            raise InvalidInput("kind: a local command (stdio MCP server) runs on the gateway's machine: it is "
                               "configured on the server only, never over HTTP")
        try:
            spec = SourceCreate.model_validate(data)
        except ValidationError as exc:
            raise _invalid(exc) from None
        if spec.kind not in HTTP_KINDS:
            raise InvalidInput(f"kind: unknown kind {spec.kind!r}; one of {', '.join(HTTP_KINDS)}")
        _operations(spec.kind, spec.operations)
        await self._check(spec.name, spec.url, spec.headers, None)
        return await self._listed(ToolSource(kind=spec.kind, name=spec.name, url=spec.url, headers=spec.headers,
                                             operations=spec.operations))

    async def update(self, source_id: str, data: Any) -> ToolSource:
        try:
            patch = SourcePatch.model_validate(data)
        except ValidationError as exc:
            raise _invalid(exc) from None
        current = await self.store.get(source_id)
        if current.kind == "stdio":
            raise InvalidInput(f"{current.name} is a local command (stdio): it is changed with the CLI only "
                               "(switchboard tools remove, then add-stdio)")
        changes = {k: v for k, v in patch.model_dump(exclude_unset=True).items() if v is not None}
        updated = current.model_copy(update=changes)
        _operations(updated.kind, updated.operations)
        await self._check(updated.name, updated.url, updated.headers, current.id)
        if updated.operations != current.operations:
            return await self._listed(updated)
        if updated.name != current.name:  # the tools are named after the source
            updated = updated.model_copy(update={"tools": [
                t.model_copy(update={"name": f"{updated.name}.{t.name.partition('.')[2]}"}) for t in updated.tools]})
        if updated.url != current.url or updated.headers != current.headers:
            return await self._listed(updated)
        self._for_turns = None
        return await self.store.save(updated)

    async def add_stdio(self, name: str, command: list[str]) -> ToolSource:
        """A local command as an MCP server (the CLI's ``add-stdio``; never reachable over HTTP)."""
        try:
            SourceCreate.model_validate({"name": name, "url": "stdio://local"})
        except ValidationError as exc:
            raise _invalid(exc) from None
        if not command or not command[0].strip():
            raise InvalidInput("command: the program to run (and its arguments)")
        if any(s.name == name for s in await self.store.list()):
            raise Conflict(f"a tool source named {name!r} exists already; its tools are {name}.*")
        return await self._listed(ToolSource(kind="stdio", name=name, url="", command=command))

    async def declare_stdio(self, declared: dict[str, list[str]]) -> list[ToolSource]:
        """The settings' stdio servers (``SWITCHBOARD_TOOL_STDIO_SERVERS``), each added when missing, or listed
        again under its new command when the command changed; those already as declared are left as they are.
        A name another kind of source has is refused (``Conflict``) before anything is changed."""
        existing = {s.name: s for s in await self.store.list()}
        for name in declared:
            if name in existing and existing[name].kind != "stdio":
                raise Conflict(f"SWITCHBOARD_TOOL_STDIO_SERVERS: {name!r} is the name of a {existing[name].kind} "
                               "tool source already")
        changed = []
        for name, command in declared.items():
            current = existing.get(name)
            if current is None:
                changed.append(await self.add_stdio(name, command))
            elif current.command != command:
                changed.append(await self._listed(current.model_copy(update={"command": command})))
        return changed

    async def refresh(self, source_id: str) -> ToolSource:
        return await self._listed(await self.store.get(source_id), strict=False)

    async def delete(self, source_id: str) -> None:
        await self.store.get(source_id)
        await self.store.delete(source_id)
        self._for_turns = None

    async def _check(self, name: str, url: str, headers: dict[str, str], own_id: str | None) -> None:
        await self.policy.check(url)  # OutboundRefused (422) before anything is stored or asked
        for header in headers:
            if not header.strip() or any(c in header for c in ":\r\n "):
                raise InvalidInput(f"headers: {header!r} is not a header name")
        if headers:
            try:
                self.store.box.seal({})  # no key: refused before the server is asked anything
            except InvalidInput:
                raise InvalidInput("headers: set SWITCHBOARD_SECRET_KEY before adding a tool source with headers "
                                   "(they are stored encrypted, with the connections' key)") from None
        if any(s.name == name and s.id != own_id for s in await self.store.list()):
            raise Conflict(f"a tool source named {name!r} exists already; its tools are {name}.*")

    async def _listed(self, source: ToolSource, strict: bool = True) -> ToolSource:
        """Ask the server for its tools (``initialize`` + ``tools/list``; an OpenAPI document's chosen
        operations), then store the source with what it answered: its tools, or the error in its status.
        ``strict`` (a save): an operation the document lacks is refused, nothing stored; on a refresh it
        is named in the status."""
        try:
            tools = await self.clients[source.kind].list_tools(source)
        except ToolServerError as exc:
            error = source.redact(str(exc))
            log.warning("tool source %s (%s): %s", source.name, source.id, error)
            status = SourceStatus(connected_at=source.status.connected_at, last_error=error[:500],
                                  last_error_at=utcnow())
            self._for_turns = None
            return await self.store.save(source.model_copy(update={"status": status, "tools": []}))
        status = SourceStatus(connected_at=utcnow())
        missing = [op for op in source.operations if f"{source.name}.{op}" not in {t.name for t in tools}]
        if missing and strict:
            raise InvalidInput(f"operations: the OpenAPI document has no operation {', '.join(map(repr, missing))}")
        if missing:
            status.last_error = f"the OpenAPI document no longer has the operation {', '.join(map(repr, missing))}"
            status.last_error_at = status.connected_at
        if len(tools) > MAX_TOOLS:
            status.last_error = f"the server lists {len(tools)} tools; only the first {MAX_TOOLS} are offered"
            status.last_error_at = status.connected_at
            tools = tools[:MAX_TOOLS]
        self._for_turns = None
        return await self.store.save(source.model_copy(update={"status": status, "tools": tools}))

    async def _sources_for_turns(self) -> dict[str, ToolSource]:
        """The sources by name, read at most every ``TURN_LIST_TTL_S`` (two round trips saved per turn);
        a change made through this process is seen at once."""
        now = time.monotonic()
        if self._for_turns is None or now - self._for_turns[0] >= TURN_LIST_TTL_S:
            self._for_turns = (now, {s.name: s for s in await self.store.list()})
        return self._for_turns[1]

    # -- the tools agents name -------------------------------------------------------------------
    async def unknown(self, names: list[str]) -> list[str]:
        """Which of these tool names (``crm.book_table``, ``crm.*``) no source lists."""
        if not names:
            return []
        sources = {s.name: s for s in await self.store.list()}
        missing = []
        for name in names:
            source_name, _, tool = name.partition(".")
            source = sources.get(source_name)
            if source is None or not tool or (tool != "*" and all(t.name != name for t in source.tools)):
                missing.append(name)
        return missing

    async def for_turn(self, names: list[str], options: CallOptions | None = None,
                       confirm: frozenset[str] = frozenset()) -> TurnTools | None:
        """The tools these names (``crm.book_table``, ``crm.*``) take, ready for a turn; None for none.
        A tool named in ``confirm`` (itself or by its source's ``*``) waits for the customer's yes."""
        if not names:
            return None
        sources = await self._sources_for_turns()
        chosen: dict[str, ToolInfo] = {}
        for name in names:
            source_name, _, tool = name.partition(".")
            source = sources.get(source_name)
            for info in source.tools if source is not None else ():
                if tool == "*" or info.name == name:
                    chosen[info.name] = info
        if not chosen:
            return None
        used = {n.partition(".")[0]: sources[n.partition(".")[0]] for n in chosen}
        specs = [ToolSpec(name=t.name, description=t.description, parameters=t.input_schema,
                          confirm=t.name in confirm or f"{t.name.partition('.')[0]}.*" in confirm)
                 for t in chosen.values()]
        return TurnTools(specs=specs, caller=SourceCaller(self.clients, used), options=options,
                         redact=_redactor(list(used.values())))


class SourceCaller:
    """Calls a turn's tools on their sources' servers or APIs (``gateway.turn.tools.ToolCaller``)."""

    def __init__(self, clients: dict[Kind, SourceClient], sources: dict[str, ToolSource]) -> None:
        self.clients = clients
        self.sources = sources

    async def call(self, name: str, arguments: dict, idempotency_key: str) -> ToolOutcome:
        source = self.sources[name.partition(".")[0]]
        try:
            return await self.clients[source.kind].call(source, name.partition(".")[2], arguments, idempotency_key)
        except ToolServerError as exc:
            return ToolOutcome(text="", error=source.redact(str(exc)))


def _redactor(sources: list[ToolSource]):
    def redact(text: str) -> str:
        for source in sources:
            text = source.redact(text)
        return text
    return redact

"""What a tool source is: a named MCP server the gateway connects to, its headers, status and tools."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, Protocol, get_args

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from gateway.core.models import new_id, utcnow
from gateway.turn.tools import ToolOutcome

__all__ = ["KINDS", "NAME_PATTERN", "Endpoint", "Kind", "OperationId", "SourceClient", "SourceStatus", "ToolInfo",
           "ToolSource", "mask"]

Kind = Literal["mcp", "openapi", "stdio"]  # stdio: a local command, added with the CLI only
KINDS: tuple[str, ...] = get_args(Kind)
# A source's name is the first part of its tools' names (``crm`` → ``crm.book_table``): no dots in it.
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,39}$"
OperationId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,100}$")]  # an OpenAPI operation's id


def mask(value: str) -> str:
    """``••••1234``: enough to tell two tokens apart, never enough to use one."""
    return "••••" + value[-4:] if len(value) > 8 else "••••"


class Endpoint(BaseModel):
    """How an OpenAPI operation is called: which argument goes where."""

    model_config = ConfigDict(frozen=True)

    method: str  # GET, POST, …
    url: str  # the server's base URL and the operation's path, with ``{name}`` for path parameters
    parameters: dict[str, Literal["path", "query", "header"]] = Field(default_factory=dict)
    body: str | None = None  # the argument sent as the JSON request body, if the operation takes one


class ToolInfo(BaseModel):
    """One tool as the server listed it (or an OpenAPI operation), named ``<source>.<tool>``."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    name: str
    description: str = ""
    input_schema: dict = Field(default_factory=lambda: {"type": "object"}, alias="inputSchema")
    endpoint: Endpoint | None = None  # OpenAPI sources only


class SourceStatus(BaseModel):
    connected_at: datetime | None = None  # the last listing the server answered
    last_error: str | None = None
    last_error_at: datetime | None = None


class ToolSource(BaseModel):
    """A source with its headers in plain text: only in memory, never stored or answered so."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=lambda: new_id()[:12])
    kind: Kind = "mcp"
    name: str = Field(pattern=NAME_PATTERN)
    url: str
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    operations: list[str] = Field(default_factory=list)  # OpenAPI sources: the operationIds offered as tools
    command: list[str] = Field(default_factory=list)  # stdio sources: the program and its arguments
    status: SourceStatus = Field(default_factory=SourceStatus)
    tools: list[ToolInfo] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

    def redact(self, text: str) -> str:
        """``text`` with every header value of this source masked (a server's error may echo one)."""
        for value in self.headers.values():
            for secret in {value, value.rpartition(" ")[2]}:  # "Bearer abc…": the token alone too
                if len(secret) >= 6:
                    text = text.replace(secret, mask(secret))
        return text

    def public(self) -> dict:
        """The answer shape: every header value masked (they carry credentials), the tools as listed."""
        body = self.model_dump(mode="json", exclude={"headers", "tools"})
        body["headers"] = {name: mask(value) for name, value in self.headers.items()}
        body["tools"] = [t.model_dump(mode="json", by_alias=True, exclude={"endpoint"} if t.endpoint is None else None)
                         for t in self.tools]
        if self.kind != "openapi":
            del body["operations"]
        if self.kind != "stdio":
            del body["command"]
        return body


class SourceClient(Protocol):
    """Lists a source's tools and calls one, for one kind of source (``McpClient``, ``OpenApiClient``,
    ``StdioClient``); whatever goes wrong is a ``ToolServerError`` saying what."""

    async def list_tools(self, source: ToolSource) -> list[ToolInfo]: ...

    async def call(self, source: ToolSource, tool: str, arguments: dict, idempotency_key: str) -> ToolOutcome: ...

"""What an MCP server answered, as the gateway uses it: its tools named ``<source>.<tool>``, a call's
result as the text the model reads, and the error inside the SDK's exception groups."""

from __future__ import annotations

import json

from mcp.types import CallToolResult, TextContent, Tool

from gateway.tools.model import ToolInfo, ToolSource
from gateway.turn.tools import ToolOutcome

__all__ = ["innermost", "listed", "outcome"]


def innermost(exc: BaseException) -> BaseException:
    """The first real error inside the task groups' exception groups the SDK raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def listed(source: ToolSource, tools: list[Tool]) -> list[ToolInfo]:
    """A server's ``tools/list`` answer as our tools, named ``<source>.<tool>``."""
    return [ToolInfo(name=f"{source.name}.{t.name}", description=t.description or "",
                     input_schema=t.inputSchema or {"type": "object"}) for t in tools]


def outcome(result: CallToolResult) -> ToolOutcome:
    """A ``tools/call`` answer as what the model reads: its text; a tool error is an outcome with ``error``.
    Images, audio and resources are named, not given as bytes the model cannot read."""
    parts = [item.text if isinstance(item, TextContent) else
             f"[{getattr(item, 'type', type(item).__name__)} content not shown]" for item in result.content]
    text = "\n".join(parts)
    if not text and result.structuredContent is not None:
        text = json.dumps(result.structuredContent, ensure_ascii=False)
    if result.isError:
        return ToolOutcome(text="", error=f"the tool reported an error: {text[:1000] or 'no details'}")
    return ToolOutcome(text=text)

"""Trying a tool from the console or the admin API: one real call, through the same client, outbound
guard, headers and time limit a turn uses, with an idempotency key of its own (``try:<id>``). The answer
is cut to ``MAX_TRY_CHARS`` and has the source's secrets masked (a careless API may echo its token); each
try is logged (tool, source, outcome — not the arguments)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from gateway.core.errors import InvalidInput, NotFound
from gateway.core.models import new_id
from gateway.tools.service import SourceCaller, ToolSources
from gateway.turn.tools import ToolOutcome, cut

__all__ = ["MAX_TRY_CHARS", "try_tool"]

log = logging.getLogger(__name__)
MAX_TRY_CHARS = 8000  # what the console shows of a tried tool's answer


async def try_tool(sources: ToolSources, source_id: str, tool: str, arguments: Any, timeout_s: float) -> dict:
    """``{"tool", "result", "error", "ms"}`` for one call of ``tool`` (``shop.getOrder``) with ``arguments``."""
    source = await sources.get(source_id)
    if not isinstance(arguments, dict):
        raise InvalidInput("arguments: a JSON object")
    if all(t.name != tool for t in source.tools):
        raise NotFound(f"{source.name} has no tool {tool!r}; its tools: "
                       f"{', '.join(t.name for t in source.tools) or 'none (refresh it?)'}")
    caller = SourceCaller(sources.clients, {source.name: source})
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            outcome = await caller.call(tool, arguments, f"try:{new_id()}")
    except TimeoutError:
        outcome = ToolOutcome(text="", error=f"no answer within {timeout_s:g} s")
    ms = round((time.perf_counter() - started) * 1000, 1)
    log.info("tool try: %s on source %s (%s): %s in %s ms", tool, source.name, source.id,
             "error" if outcome.error else "answered", ms)
    return {"tool": tool, "ms": ms, "error": source.redact(outcome.error) if outcome.error else None,
            "result": None if outcome.error else source.redact(cut(outcome.text, MAX_TRY_CHARS))}

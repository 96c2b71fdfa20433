"""A real MCP server over stdio (the official SDK's FastMCP), run as a local command by the gateway:
``python mcp_stdio_server.py RECORD_FILE``. Each ``tools/call`` appends a JSON line (tool, arguments,
``_meta.idempotencyKey``) to RECORD_FILE, since the test cannot see into this process."""

from __future__ import annotations

import json
import sys

from mcp.server.fastmcp import Context, FastMCP

mcp = FastMCP("stock", log_level="WARNING")


@mcp.tool(description="How many of an item are in stock.")
def count_stock(item: str, ctx: Context) -> str:
    meta = ctx.request_context.meta
    with open(sys.argv[1], "a", encoding="utf-8") as record:
        record.write(json.dumps({"tool": "count_stock", "arguments": {"item": item},
                                 "idempotency_key": getattr(meta, "idempotencyKey", None) if meta else None}) + "\n")
    return f"{item}: 12 in stock"


if __name__ == "__main__":
    mcp.run(transport="stdio")

"""``switchboard tools``: tool sources from the server's own command line.

``add-stdio NAME -- COMMAND [ARGS…]`` adds an MCP server that is a local command (stdio transport): the
gateway starts it for each listing and call. Only here, never over HTTP — whoever can reach the admin API
must not be able to make the gateway's machine run a program. ``list`` shows every source with its status
and tools; ``remove NAME`` deletes one. Exit 1 when the command's tools could not be listed (the source is
saved anyway, with the reason, as the API saves an unreachable server), 2 for refused input.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from gateway.cli.local_redis import local_redis
from gateway.core.settings import Settings

__all__ = ["register_tools"]


def register_tools(sub: argparse._SubParsersAction) -> None:
    tools = sub.add_parser("tools", help="tool sources (MCP servers, OpenAPI documents, local commands)")
    tools_sub = tools.add_subparsers(dest="tools_command", required=True)
    add = tools_sub.add_parser("add-stdio", help=(
        "add a local command as an MCP server (stdio): switchboard tools add-stdio NAME -- COMMAND [ARGS...]"))
    add.add_argument("name", help="the source's name, the first part of its tools' names (stock → stock.count)")
    add.add_argument("command", nargs=argparse.REMAINDER, help="the program and its arguments, after --")
    tools_sub.add_parser("list", help="every tool source with its status and tools")
    remove = tools_sub.add_parser("remove", help="delete a tool source by name")
    remove.add_argument("name")
    tools.set_defaults(func=_tools)


def _line(source) -> str:
    where = " ".join(source.command) if source.kind == "stdio" else source.url
    state = f"error: {source.status.last_error}" if source.status.last_error else "connected"
    return f"{source.name}\t{source.kind}\t{where}\t{state}\t{', '.join(t.name for t in source.tools) or '-'}"


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    from gateway.connections.key_file import secret_keys
    from gateway.connections.secrets import CredentialBox
    from gateway.conversation.store import RedisStore
    from gateway.core.errors import GatewayError
    from gateway.core.outbound import OutboundPolicy
    from gateway.tools.mcp_client import McpClient
    from gateway.tools.service import ToolSources
    from gateway.tools.store import ToolSourceStore

    keys = await asyncio.to_thread(secret_keys, settings, create=False)
    policy = OutboundPolicy.parse(settings.outbound_allow_hosts)
    async with local_redis(settings) as redis:
        sources = ToolSources(ToolSourceStore(RedisStore(redis, settings.agent_id),
                                              CredentialBox(keys.raw, keys.generated_file)), McpClient(policy), policy)
        try:
            if args.tools_command == "add-stdio":
                command = args.command[1:] if args.command[:1] == ["--"] else args.command
                source = await sources.add_stdio(args.name, command)
                print(_line(source))
                return 1 if source.status.last_error and not source.tools else 0
            listed = await sources.list()
            if args.tools_command == "list":
                for source in listed:
                    print(_line(source))
                return 0
            match = next((s for s in listed if s.name == args.name), None)
            if match is None:
                print(f"switchboard: no tool source named {args.name!r}", file=sys.stderr)
                return 1
            await sources.delete(match.id)
            print(f"removed {match.name}")
            return 0
        except GatewayError as exc:
            print(f"switchboard: {exc.message}", file=sys.stderr)
            return 2


def _tools(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_run(settings, args))

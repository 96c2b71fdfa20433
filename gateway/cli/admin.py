"""``switchboard operators create NAME [--role admin|operator]`` (also ``switchboard admin create-user``): a
console account, straight into
Redis (the configured one, or the embedded one under the data dir — the running gateway's if it
is up, else started for the moment)."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys

from gateway.core.settings import Settings


def register_admin(sub: argparse._SubParsersAction) -> None:
    admin = sub.add_parser("admin", help="console accounts")
    admin_sub = admin.add_subparsers(dest="admin_command", required=True)
    create = admin_sub.add_parser("create-user", help="add a console account (asks for its password)")
    create.add_argument("name")
    create.add_argument("--role", choices=["admin", "operator"], default="operator")
    create.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    admin.set_defaults(func=_admin)
    operators = sub.add_parser("operators", help="console accounts")
    operators_sub = operators.add_subparsers(dest="operators_command", required=True)
    create = operators_sub.add_parser(
        "create", help="add a console account (asks for its password); the first account is an admin"
    )
    create.add_argument("name")
    create.add_argument("--role", choices=["admin", "operator"], default=None,
                        help="default: admin for the first account, operator after that")
    create.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    operators.set_defaults(func=_admin)


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\n")
    first = getpass.getpass("Password: ")
    if getpass.getpass("Password again: ") != first:
        raise SystemExit("the passwords differ; nothing was changed")
    return first


async def _create(settings: Settings, name: str, role: str | None, password: str) -> str:
    from gateway.cli.local_redis import local_redis
    from gateway.conversation.operators import Operators
    from gateway.conversation.store import RedisStore

    async with local_redis(settings) as redis:
        operators = Operators(RedisStore(redis, settings.agent_id))
        if role is None:  # the first account must be able to run the console
            role = "admin" if await operators.count() == 0 else "operator"
        operator = await operators.create(name, password, role)  # type: ignore[arg-type]
        return f"created {operator.role} {operator.username}"


def _admin(args: argparse.Namespace, settings: Settings) -> int:
    from gateway.core.errors import GatewayError

    password = _password(args.password_stdin)
    try:
        print(asyncio.run(_create(settings, args.name, args.role, password)))
    except GatewayError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return 1
    return 0

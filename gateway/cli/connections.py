"""``switchboard connections check-keys`` and ``switchboard connections rotate-keys``: which configured key
opens each connection's stored credentials, and re-encrypting them under the newest key.

``check-keys`` changes nothing and exits 1 when any connection would be unreadable with the newest key
alone (so an older key must stay), 0 when older keys can be removed. ``rotate-keys`` does what the
gateway does at start and exits 1 when any connection could not be re-encrypted. Both use the same keys
as the gateway: ``SWITCHBOARD_SECRET_KEY``, and in embedded mode the data dir's generated key.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from gateway.cli.local_redis import local_redis
from gateway.core.settings import Settings

__all__ = ["register_connections"]


def register_connections(sub: argparse._SubParsersAction) -> None:
    connections = sub.add_parser("connections", help="channel connections' stored credentials")
    connections_sub = connections.add_subparsers(dest="connections_command", required=True)
    connections_sub.add_parser("check-keys", help=(
        "say which SWITCHBOARD_SECRET_KEY key opens each connection; exit 1 if any needs an older key "
        "or none opens it"))
    connections_sub.add_parser("rotate-keys", help=(
        "re-encrypt every connection under the newest key (the gateway also does it at start); exit 1 if any "
        "could not be"))
    connections.set_defaults(func=_connections)


async def _run(settings: Settings, command: str) -> int:
    from gateway.connections.key_file import secret_keys
    from gateway.connections.secrets import CredentialBox
    from gateway.connections.store import ConnectionStore
    from gateway.conversation.store import RedisStore

    keys = await asyncio.to_thread(secret_keys, settings, create=False)
    box = CredentialBox(keys.raw, keys.generated_file)
    where = f"the generated key in {keys.generated_file}" if keys.generated_file else "SWITCHBOARD_SECRET_KEY"
    async with local_redis(settings) as redis:
        store = ConnectionStore(RedisStore(redis, settings.agent_id), box)
        report = await (store.rotate_keys() if command == "rotate-keys" else store.check_keys())
    if box.ready:
        print(f"keys: {box.key_count} from {where} (key 1 is the newest)")
    else:
        print("keys: none (set SWITCHBOARD_SECRET_KEY)")
    for record in report.records:
        print(record.line())
    if report.resealed:
        print(f"re-encrypted under the newest key: {', '.join(report.resealed)}")
    print(report.summary())
    if command == "rotate-keys":
        return 1 if report.unreadable else 0
    return 0 if report.older_keys_removable else 1


def _connections(args: argparse.Namespace, settings: Settings) -> int:
    try:
        return asyncio.run(_run(settings, args.connections_command))
    except ValueError as exc:  # an unusable key file or key: one line, what to do is in the message
        print(f"switchboard: {exc}", file=sys.stderr)
        return 2

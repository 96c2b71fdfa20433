"""``switchboard demo remove``: take out everything the demo put in — its bike-shop topics and the business
name and opening hours it filled in (while they are still the demo's) — through a running gateway's admin
API when one answers (local-mode Qdrant has one owner), else on the data dir and Redis directly."""

from __future__ import annotations

import argparse
import asyncio

from gateway.core.settings import Settings


def register_demo(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="the demo knowledge base that `serve --demo` (make run) loads")
    demo_sub = demo.add_subparsers(dest="demo_command", required=True)
    demo_sub.add_parser("remove", help="delete the demo's topics, business name and hours (your own content stays)")
    demo.set_defaults(func=_demo)


async def _remove_local(settings: Settings):
    from gateway.catalogue import CUSTOMER_ATTRIBUTES
    from gateway.cli.kb import _local
    from gateway.cli.local_redis import local_redis
    from gateway.conversation.attributes import CustomerAttributes
    from gateway.conversation.store import RedisStore
    from gateway.core.clock import Clock
    from gateway.knowledge.demo import remove_demo
    from gateway.live.calendar import CalendarService

    async with local_redis(settings) as redis:
        attributes = CustomerAttributes(RedisStore(redis, settings.agent_id), CUSTOMER_ATTRIBUTES)
        removal = await _local(settings, remove_demo, attributes)
        if removal.attributes:  # no gateway hears the change: the stored calendar is rebuilt here
            await CalendarService(attributes, Clock()).rebuild()
        return removal


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from gateway.cli.kb import _Remote, _running

    if _running(settings):
        said = _Remote(settings).call("DELETE", "/api/kb/demo")["summary"]
    else:
        said = asyncio.run(_remove_local(settings)).summary()
    print(said)
    return 0

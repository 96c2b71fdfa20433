"""``switchboard demo remove``: take the demo's bike-shop topics out of the knowledge base, through a running
gateway's admin API when one answers (local-mode Qdrant has one owner), else on the data dir directly."""

from __future__ import annotations

import argparse
import asyncio

from gateway.core.settings import Settings


def register_demo(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="the demo knowledge base that `serve --demo` (make run) loads")
    demo_sub = demo.add_subparsers(dest="demo_command", required=True)
    demo_sub.add_parser("remove", help="delete the demo's topics (your own topics and documents stay)")
    demo.set_defaults(func=_demo)


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from gateway.cli.kb import _local, _Remote, _running
    from gateway.knowledge.demo import demo_sources, remove_demo_knowledge

    if _running(settings):
        remote = _Remote(settings)
        removed = 0
        for source in demo_sources():
            removed += remote.call("DELETE", f"/api/kb/topics/{source}", allow_status=(404,)) is None
    else:
        removed = asyncio.run(_local(settings, remove_demo_knowledge))
    print(f"removed {removed} demo topic(s)" if removed else "no demo topics to remove")
    return 0

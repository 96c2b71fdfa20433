"""``switchboard kb crawl URL``: through a running gateway (a queued job, its progress polled) or,
with none running, here (the same ``WebsiteIngestion`` on the local knowledge base)."""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from gateway.core.settings import Settings

POLL_S = 0.5


def _limits(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    return {
        "max_depth": args.depth if args.depth is not None else settings.crawl_max_depth,
        "max_pages": args.max_pages if args.max_pages is not None else settings.crawl_max_pages,
    }


def _progress() -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), transient=True)


def _print_job(job: dict[str, Any]) -> int:
    print(f"crawl {job['status']}: {job['message']}")
    for problem in job["problems"]:
        print(f"  {problem}")
    return 0 if job["status"] == "done" else 1


def crawl(args: argparse.Namespace, settings: Settings, remote: Any | None) -> int:
    if remote is not None:
        job = remote.call("POST", "/api/kb/crawl", json={"url": args.url, "kb": args.kb, **_limits(args, settings)})
        with _progress() as bar:
            task = bar.add_task("queued")
            while job["status"] in ("queued", "running"):
                time.sleep(POLL_S)
                job = remote.call("GET", f"/api/kb/jobs/{job['id']}")
                bar.update(task, description=f"{job['pages_fetched']} fetched, {job['pages_queued']} queued, "
                                             f"{job['errors']} errors")
        return _print_job(job)
    return asyncio.run(_crawl_here(args, settings))


class _BarReport:
    def __init__(self, bar: Progress) -> None:
        self._bar = bar
        self._task = bar.add_task("starting")
        self.fetched = self.queued = self.errors = 0
        self.problems: list[str] = []

    async def advance(self, *, done: int = 0, errors: int = 0, pages_fetched: int = 0, pages_queued: int = 0) -> None:
        self.fetched += pages_fetched
        self.queued += pages_queued
        self.errors += errors
        self._bar.update(self._task, description=f"{self.fetched} fetched, {self.queued} queued, {self.errors} errors")

    async def problem(self, text: str) -> None:
        self.problems.append(text)


async def _crawl_here(args: argparse.Namespace, settings: Settings) -> int:
    from gateway.core.errors import GatewayError
    from gateway.core.outbound import OutboundPolicy
    from gateway.core.outbound_client import FetchLimits, GuardedClient
    from gateway.knowledge.crawler import Crawler, CrawlLimits
    from gateway.knowledge.search import Knowledge
    from gateway.knowledge.websites import SiteRequest, WebsiteIngestion

    client = GuardedClient(OutboundPolicy.parse(settings.outbound_allow_hosts), FetchLimits(
        timeout_s=settings.outbound_timeout_s, max_bytes=int(settings.crawl_max_page_mb * 1024 * 1024),
        max_ratio=settings.outbound_max_compression_ratio,
        retries=settings.outbound_retries,
    ))
    knowledge = Knowledge(settings, None)
    limits = CrawlLimits(**_limits(args, settings), per_host_delay_s=settings.crawl_delay_s)
    websites = WebsiteIngestion(knowledge, lambda crawl_limits: Crawler(client, crawl_limits), limits)
    try:
        await knowledge.bases.info(args.kb)
        with _progress() as bar:
            report = _BarReport(bar)
            summary = await websites.crawl(report, SiteRequest(args.url), kb=args.kb)
    except GatewayError as exc:
        raise SystemExit(f"error: {exc}") from None
    finally:
        await client.aclose()
        knowledge.close()
    print(f"crawl {'done' if summary.pages else 'failed'}: {summary.pages} page(s), {summary.changed} changed, "
          f"{summary.unchanged} unchanged, {summary.failed} failed, {summary.removed} removed")
    for problem in report.problems:
        print(f"  {problem}")
    return 0 if summary.pages else 1

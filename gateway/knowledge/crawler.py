"""A polite, same-host website crawler for the knowledge base.

Breadth-first from the start URL (sitemap pages count as one hop away), robots.txt honoured,
at most one request per ``per_host_delay_s`` (or the site's Crawl-delay, up to a cap), only
HTML, text, Markdown and PDF pages, every request through the ``GuardedClient`` (so every
address, redirect hops included, passes the outbound policy). Each page comes out as a
``CrawledPage`` or a ``CrawlProblem`` saying why not; links to other hosts are counted and left, and a
redirect to another host is refused from its ``Location`` before anything is sent there."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Literal
from urllib.parse import urljoin, urlsplit, urlunsplit

import lxml.html
from lxml.etree import ParserError
from pydantic import BaseModel, ConfigDict, Field

from gateway.core.outbound import OutboundRefused
from gateway.core.outbound_client import FetchFailed, FetchRefused, GuardedClient
from gateway.knowledge.site_rules import RobotsRules, sitemap_locations

CRAWLED_TYPES = frozenset({"text/html", "application/xhtml+xml", "text/plain", "text/markdown", "application/pdf"})
MAX_CRAWL_DELAY_S = 10.0
MAX_SITEMAP_URLS = 5000


class CrawlLimits(BaseModel):
    model_config = ConfigDict(frozen=True)

    max_depth: int = Field(default=2, ge=0, le=10)
    max_pages: int = Field(default=50, ge=1, le=10_000)
    per_host_delay_s: float = Field(default=1.0, ge=0)


@dataclass(frozen=True)
class CrawledPage:
    url: str
    content_type: str
    body: bytes
    depth: int


@dataclass(frozen=True)
class CrawlProblem:
    url: str
    reason: str
    kind: Literal["error", "skipped"] = "error"  # skipped: robots.txt, a content type we do not read


@dataclass(frozen=True)
class CrawlProgress:
    fetched: int = 0
    queued: int = 0  # pages found and not fetched yet
    skipped: int = 0
    errors: int = 0


def normalise(url: str) -> str:
    """Lower-case scheme and host, default port and fragment dropped, empty path as ``/``."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 literal: hostname drops the brackets the URL needs
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or (scheme, port) in (("http", 80), ("https", 443)) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def _host(url: str) -> str:
    return urlsplit(url).netloc


def links(page_url: str, body: bytes) -> list[str]:
    """Absolute http(s) links of an HTML page, fragments dropped, in order of appearance."""
    try:
        document = lxml.html.fromstring(body)
    except (ParserError, ValueError):
        return []
    base = next(iter(document.xpath("//base/@href")), None) or page_url
    out = []
    for href in document.xpath("//a/@href"):
        href = str(href).strip()
        if not href or href.startswith(("#", "mailto:", "javascript:", "tel:", "data:")):
            continue
        try:
            absolute = urljoin(urljoin(page_url, str(base)), href)
        except ValueError:
            continue
        if urlsplit(absolute).scheme in ("http", "https"):
            out.append(normalise(absolute))
    return out


class Crawler:
    def __init__(
        self, client: GuardedClient, limits: CrawlLimits | None = None, *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._client = client
        self.limits = limits or CrawlLimits()
        self._sleep = sleep
        self._last_request = 0.0
        self._delay = self.limits.per_host_delay_s

    async def _polite(self) -> None:
        wait = self._last_request + self._delay - time.monotonic()
        if self._last_request and wait > 0:
            await self._sleep(wait)
        self._last_request = time.monotonic()

    async def _get(self, url: str, types: frozenset[str] | None = None, site: str | None = None):
        """``url`` fetched politely; with ``site``, a redirect to another host is refused unrequested."""
        await self._polite()
        follow = (lambda target: _host(normalise(target)) == site) if site is not None else None
        return await self._client.get(url, accept=(lambda t: t in types) if types else None, follow=follow)

    async def _robots(self, start: str) -> RobotsRules:
        parts = urlsplit(start)
        robots_url = urlunsplit((parts.scheme, parts.netloc, "/robots.txt", "", ""))
        try:
            response = await self._get(robots_url)
        except FetchFailed as exc:
            if exc.status is not None and 400 <= exc.status < 500:
                return RobotsRules(None, self._client.user_agent)  # no robots.txt: nothing is off limits
            raise FetchFailed(start, f"robots.txt could not be read ({exc.reason}); nothing was crawled") from exc
        return RobotsRules(response.body.decode("utf-8", "replace"), self._client.user_agent)

    async def _sitemap_pages(self, start: str, robots: RobotsRules) -> list[str]:
        parts = urlsplit(start)
        pending = robots.sitemaps() or [urlunsplit((parts.scheme, parts.netloc, "/sitemap.xml", "", ""))]
        pages: list[str] = []
        for level in range(2):  # a sitemap index is followed one level down
            nested: list[str] = []
            for sitemap in pending:
                if _host(normalise(sitemap)) != _host(start):
                    continue
                try:
                    response = await self._get(sitemap, site=_host(start))
                except (FetchFailed, OutboundRefused):
                    continue  # a missing or broken sitemap only means fewer starting points
                found, children = sitemap_locations(response.body)
                pages += found
                nested += children if level == 0 else []
            pending = nested
        return [normalise(p) for p in pages if _host(normalise(p)) == _host(start)][:MAX_SITEMAP_URLS]

    async def crawl(
        self, start_url: str, on_progress: Callable[[CrawlProgress], Awaitable[None]] | None = None
    ) -> AsyncIterator[CrawledPage | CrawlProblem]:
        start = normalise(start_url)
        progress = CrawlProgress()
        try:
            await self._client.policy.check(start)
            robots = await self._robots(start)
        except (OutboundRefused, FetchFailed) as exc:
            yield CrawlProblem(start, f"refused by the outbound guard: {exc}" if isinstance(exc, OutboundRefused)
                               else exc.reason)
            return
        delay = robots.crawl_delay()
        if delay is not None:
            self._delay = max(self.limits.per_host_delay_s, min(delay, MAX_CRAWL_DELAY_S))
        queue: deque[tuple[str, int]] = deque([(start, 0)])
        seen = {start}
        for page in await self._sitemap_pages(start, robots):
            if page not in seen:
                seen.add(page)
                queue.append((page, 1))
        site = _host(start)
        pages = 0
        while queue and pages < self.limits.max_pages:
            url, depth = queue.popleft()
            progress = replace(progress, queued=len(queue))
            item = await self._visit(url, depth, site, robots)
            if isinstance(item, CrawlProblem):
                kind = "skipped" if item.kind == "skipped" else "errors"
                progress = replace(progress, **{kind: getattr(progress, kind) + 1})
                yield item
            else:
                if url == start:
                    site = _host(item.url)  # where the start URL redirected to is the site
                if item.url != url and item.url in seen and url != start:
                    continue  # a redirect to a page already taken
                seen.add(item.url)
                pages += 1
                progress = replace(progress, fetched=progress.fetched + 1)
                if item.content_type in ("text/html", "application/xhtml+xml") and depth < self.limits.max_depth:
                    for link in links(item.url, item.body):
                        if link in seen:
                            continue
                        if _host(link) != site:
                            seen.add(link)
                            progress = replace(progress, skipped=progress.skipped + 1)
                            continue
                        seen.add(link)
                        queue.append((link, depth + 1))
                progress = replace(progress, queued=len(queue))
                yield item
            if on_progress is not None:
                await on_progress(progress)

    async def _visit(self, url: str, depth: int, site: str, robots: RobotsRules) -> CrawledPage | CrawlProblem:
        if not robots.allows(url):
            return CrawlProblem(url, "disallowed by robots.txt", "skipped")
        try:
            # the start URL may move to another host (which then is the site); no later page may
            response = await self._get(url, CRAWLED_TYPES, site if depth > 0 else None)
        except OutboundRefused as exc:
            return CrawlProblem(url, f"refused by the outbound guard: {exc}")
        except FetchRefused as exc:
            return CrawlProblem(url, exc.reason, "skipped")
        except FetchFailed as exc:
            return CrawlProblem(url, exc.reason)
        final = normalise(response.url)
        if depth > 0 and _host(final) != site:
            return CrawlProblem(url, f"redirected to another site ({final})", "skipped")
        return CrawledPage(final, response.content_type, response.body, depth)

"""The crawler against a real local website: exactly which paths it requests, what it yields,
and why it leaves the rest (robots.txt, other hosts, private addresses, limits, failures)."""

from __future__ import annotations

import ipaddress

import pytest

from gateway.core.outbound import OutboundPolicy
from gateway.core.outbound_client import FetchLimits, GuardedClient
from gateway.knowledge.crawler import CrawledPage, Crawler, CrawlLimits, CrawlProblem, links, normalise
from tests.fakes.live_server import LiveServer
from tests.fakes.website import Website

NAMES = {"site.test": "127.0.0.1", "elsewhere.test": "127.0.0.1", "internal.test": "10.0.0.5",
         "other.example": "93.184.216.34"}


async def _resolve(host: str, port: int):
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        return [ipaddress.ip_address(NAMES[host])]


def _page(*links: str, text: str = "Some words about bikes.") -> str:
    anchors = "".join(f'<a href="{href}">link</a> ' for href in links)
    return f"<html><body><main><p>{text}</p>{anchors}</main></body></html>"


@pytest.fixture
def site():
    website = Website()
    with LiveServer(website.app()) as server:
        website.base = f"http://site.test:{server.port}"
        website.port = server.port
        yield website


def _crawler(site, sleeps: list[float], **limits) -> Crawler:
    async def sleep(seconds: float) -> None:
        sleeps.append(round(seconds, 2))

    policy = OutboundPolicy.parse("127.0.0.1", resolver=_resolve)
    client = GuardedClient(policy, FetchLimits(max_bytes=50_000, retries=2, backoff_s=0.5), sleep=sleep)
    return Crawler(client, CrawlLimits(**{"per_host_delay_s": 0.0, **limits}), sleep=sleep)


async def _run(crawler: Crawler, url: str) -> tuple[list[CrawledPage], list[CrawlProblem]]:
    pages, problems = [], []
    async for item in crawler.crawl(url):
        (pages if isinstance(item, CrawledPage) else problems).append(item)
    return pages, problems


async def test_a_crawl_fetches_exactly_the_pages_it_may(site):
    port = site.port
    site.add("/robots.txt", f"User-agent: *\nDisallow: /private/\nSitemap: {site.base}/sitemap.xml\n",
             content_type="text/plain")
    site.add("/sitemap.xml", (
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>{site.base}/hidden</loc></url><url><loc>http://other.example/listed</loc></url></urlset>"
    ), content_type="application/xml")
    site.add("/", _page("/about", "/private/secret", "/old", "http://other.example/page",
                        f"http://internal.test:{port}/admin", "/logo.png", "/flaky", "/down", "/huge", "/deep1",
                        "/jump", "mailto:shop@example.com", "#top", "/about#team"))
    site.add("/about", _page(text="We rent bikes by the harbour."), set_cookie="session=abc; Path=/")
    site.add("/hidden", "Only the sitemap knows this page.", content_type="text/plain")
    site.add("/private/secret", _page(text="secret"))
    site.add("/old", statuses=[301], location="/moved")
    site.add("/moved", statuses=[302], location=f"{site.base}/final")
    site.add("/final", _page(text="Where the old page went."))
    site.add("/logo.png", b"\x89PNG....", content_type="image/png")
    site.add("/flaky", _page(text="Back after a hiccup."), statuses=[503, 200])
    site.add("/down", _page(), statuses=[503])
    site.add("/huge", "x" * 60_000, content_type="text/plain")
    site.add("/deep1", _page("/deep2"))
    site.add("/deep2", _page("/deep3"))
    site.add("/deep3", _page())
    site.add("/jump", statuses=[302], location=f"http://internal.test:{port}/secret")
    sleeps: list[float] = []

    pages, problems = await _run(_crawler(site, sleeps, max_depth=2), f"{site.base}/")

    assert [p.url.removeprefix(site.base) for p in pages] == [
        "/", "/hidden", "/about", "/final", "/flaky", "/deep1", "/deep2"]
    reasons = {p.url.removeprefix(site.base): p.reason for p in problems}
    jump = reasons.pop("/jump")
    assert reasons == {
        "/private/secret": "disallowed by robots.txt",
        "/logo.png": "content type image/png is not fetched",
        "/down": "HTTP 503 after 3 tries",
        "/huge": "the page is 60000 bytes; the limit is 50000",
    }
    assert jump == f"redirected to http://internal.test:{port}/secret, which is not followed"  # never asked
    assert sorted(site.paths()) == sorted([
        "/robots.txt", "/sitemap.xml", "/", "/hidden", "/about", "/old", "/moved", "/final", "/logo.png",
        "/flaky", "/flaky", "/down", "/down", "/down", "/huge", "/deep1", "/deep2", "/jump",
    ])
    assert {host for host, _ in site.requests} == {f"site.test:{port}"}  # sent to the checked address by name
    assert site.cookies == []  # a cookie the site set is never sent back (nor to any other site)
    assert sleeps == [0.5, 0.5, 1.0]  # the retries' backoff: /flaky once, /down twice


async def test_a_refused_start_url_is_reported_and_nothing_is_fetched(site):
    pages, problems = await _run(_crawler(site, []), f"http://internal.test:{site.port}/")
    assert pages == [] and len(problems) == 1
    assert "refused by the outbound guard" in problems[0].reason and "private address" in problems[0].reason
    assert site.requests == []


async def test_page_limit_and_politeness(site):
    site.add("/", _page(*(f"/p{i}" for i in range(10))))
    for i in range(10):
        site.add(f"/p{i}", _page())
    sleeps: list[float] = []
    pages, _ = await _run(_crawler(site, sleeps, max_pages=4, per_host_delay_s=0.2), f"{site.base}/")
    assert [p.url.removeprefix(site.base) for p in pages] == ["/", "/p0", "/p1", "/p2"]
    assert site.paths() == ["/robots.txt", "/sitemap.xml", "/", "/p0", "/p1", "/p2"]
    assert len(sleeps) == 5 and all(0 < s <= 0.2 for s in sleeps)  # one wait before every request after the first


async def test_an_off_site_redirect_is_refused_before_its_target_is_requested(site):
    elsewhere = Website()
    with LiveServer(elsewhere.app()) as other:
        away = f"http://elsewhere.test:{other.port}"
        elsewhere.add("/landing", _page(text="Another site."))
        elsewhere.add("/sitemap-2.xml", "<urlset/>", content_type="application/xml")
        site.add("/robots.txt", f"User-agent: *\nSitemap: {site.base}/sitemap.xml\n", content_type="text/plain")
        site.add("/sitemap.xml", statuses=[301], location=f"{away}/sitemap-2.xml")
        site.add("/", _page("/away", "/home"))
        site.add("/away", statuses=[302], location=f"{away}/landing")
        site.add("/home", statuses=[301], location="/about")  # on the same site: followed
        site.add("/about", _page(text="About us."))
        pages, problems = await _run(_crawler(site, []), f"{site.base}/")
    assert [p.url.removeprefix(site.base) for p in pages] == ["/", "/about"]
    assert [(p.url.removeprefix(site.base), p.kind, p.reason) for p in problems] == [
        ("/away", "skipped", f"redirected to {away}/landing, which is not followed")]
    assert elsewhere.requests == []  # neither the page nor the sitemap was asked for


def test_ipv6_literal_urls_keep_their_brackets():
    assert normalise("HTTP://[2001:DB8::1]:8080/a#b") == "http://[2001:db8::1]:8080/a"
    assert normalise("http://[::1]/") == "http://[::1]/"
    assert links("http://[::1]:8080/", b'<a href="/next">n</a><a href="http://[fe80::2]/x">x</a>') == [
        "http://[::1]:8080/next", "http://[fe80::2]/x"]

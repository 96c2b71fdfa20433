"""Compression bombs through the guarded outbound client: the size caps count DECODED bytes and the
compression ratio is bounded, for a crawl and for the HTTP reranker (data injection: tests/gateway/live)."""

from __future__ import annotations

import gzip
import ipaddress
import os

import pytest

from gateway.core.outbound import OutboundPolicy
from gateway.core.outbound_client import FetchLimits, GuardedClient, GuardedTransport
from gateway.knowledge.crawler import CrawledPage, Crawler, CrawlLimits, CrawlProblem
from rag_core.errors import RerankerUnavailable
from rag_core.rerankers import HttpReranker
from tests.fakes.bombs import bomb
from tests.fakes.live_server import LiveServer
from tests.fakes.website import Website

MB = 1024 * 1024
CODINGS = ["gzip", "deflate", "raw-deflate"]


async def _resolve(host: str, port: int):
    return [ipaddress.ip_address("127.0.0.1")]


@pytest.fixture
def site():
    website = Website()
    with LiveServer(website.app()) as server:
        website.base = f"http://site.test:{server.port}"
        yield website


def _page(text: str) -> str:
    return f"<html><body><main><p>{text}</p></main></body></html>"


async def _crawl(site: Website, max_bytes: int) -> tuple[dict[str, bytes], dict[str, str]]:
    policy = OutboundPolicy.parse("127.0.0.1", resolver=_resolve)
    client = GuardedClient(policy, FetchLimits(max_bytes=max_bytes, retries=0))
    pages, problems = {}, {}
    try:
        async for item in Crawler(client, CrawlLimits(per_host_delay_s=0.0)).crawl(f"{site.base}/"):
            path = item.url.removeprefix(site.base)
            if isinstance(item, CrawledPage):
                pages[path] = item.body
            elif isinstance(item, CrawlProblem):
                problems[path] = item.reason
    finally:
        await client.aclose()
    return pages, problems


async def test_a_crawl_refuses_pages_that_decode_past_the_cap_or_the_ratio(site):
    links = "".join(f'<a href="/{name}">x</a>' for name in [*CODINGS, "big-gzip", "small-gzip"])
    site.add("/", _page(f"Bikes by the harbour. {links}"))
    for coding in CODINGS:  # ~20 KB on the wire, 20 MB decoded
        site.add(f"/{coding}", bomb(coding, 20 * MB, b" "), encoding=coding.removeprefix("raw-"))
    noise = os.urandom(3 * MB // 2).hex().encode()  # 3 MB decoded, ~1.7 MB on the wire: under the cap
    site.add("/big-gzip", gzip.compress(noise, 1), content_type="text/plain", encoding="gzip")
    site.add("/small-gzip", gzip.compress(_page("Open from nine to six.").encode()), encoding="gzip")

    pages, problems = await _crawl(site, max_bytes=2_500_000)

    assert set(pages) == {"/", "/small-gzip"}
    assert b"Open from nine to six." in pages["/small-gzip"]  # an ordinary gzip page is read as before
    ratio = ("the page decompresses more than 100 times its size on the wire (a compression bomb?); "
             "the limit is SWITCHBOARD_OUTBOUND_MAX_COMPRESSION_RATIO")
    assert problems == {
        "/gzip": ratio, "/deflate": ratio, "/raw-deflate": ratio,
        "/big-gzip": "the page is larger than the limit of 2500000 bytes (decoded)",
    }


async def test_a_crawl_refuses_an_encoding_the_guard_does_not_decode(site):
    site.add("/", _page("<a href='/br'>x</a>"))
    site.add("/br", b"\x1b\x00\x00", encoding="br")
    _, problems = await _crawl(site, max_bytes=MB)
    assert problems == {"/br": "the page cannot be read: content encoding 'br' is not accepted "
                               "(the guard decodes gzip, deflate)"}


@pytest.mark.parametrize("coding", CODINGS)
async def test_the_http_reranker_stops_reading_a_bomb(site, coding):
    site.add("/rerank", bomb(coding, 50 * MB, b"[" * 7), content_type="application/json",
             encoding=coding.removeprefix("raw-"))
    transport = GuardedTransport(OutboundPolicy.parse("127.0.0.1", resolver=_resolve), max_bytes=2 * MB)
    reranker = HttpReranker(site.base, transport=transport)
    try:
        with pytest.raises(RerankerUnavailable) as failure:
            await reranker.rerank("bikes", ["a", "b"], top_n=2)
    finally:
        await reranker.aclose()
    assert "the response is larger than the limit of 2097152 bytes" in str(failure.value)
    assert site.paths() == ["/rerank"]

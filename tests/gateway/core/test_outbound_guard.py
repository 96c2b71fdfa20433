"""The one outbound guard, one matrix: every spelling of a forbidden address is refused by every way
out the gateway has (the crawler's GET, data injection's POST, a client on the guarded transport as the
reranker gets it), before anything is sent; so is every redirect hop to one; allowed when allow-listed;
size and time capped. Names resolve through a table here: nothing leaves the machine."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Awaitable, Callable

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from gateway.core.outbound import OutboundPolicy, OutboundRefused
from gateway.core.outbound_client import (
    FetchFailed,
    FetchLimits,
    FetchTooLarge,
    GuardedClient,
    GuardedTransport,
    OutboundBlocked,
    OutboundTooLarge,
)
from tests.fakes.live_server import LiveServer
from tests.fakes.website import Website

NAMES = {"private.test": "10.1.2.3", "rebound.test": "127.0.0.1", "mapped.test": "::ffff:192.168.1.1"}

REFUSED = [
    ("http://127.0.0.1/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://2130706433/", "loopback"),
    ("http://0x7f000001/", "loopback"),
    ("http://0177.0.0.1/", "loopback"),
    ("http://0x7f.0.0.1/", "loopback"),
    ("http://localhost/", "loopback"),
    ("http://LOCALHOST./", "loopback"),
    ("http://[::1]/", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://[::ffff:7f00:1]/", "loopback"),
    ("http://[64:ff9b::7f00:1]/", "loopback"),
    ("http://[2002:a00:1::]/", "private"),
    ("http://10.20.30.40/", "private"),
    ("http://172.16.0.9/", "private"),
    ("http://192.168.1.1/", "private"),
    ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ("http://metadata.google.internal/computeMetadata/v1/", "metadata"),
    ("http://[fd00::1]/", "private"),
    ("http://[fe80::1]/", "link-local"),
    ("http://0.0.0.0/", "unspecified"),
    ("http://0/", "unspecified"),
    ("http://100.64.0.1/", "non-public"),
    ("http://private.test/", "10.1.2.3, a private address"),
    ("http://mapped.test/", "private"),
    ("file:///etc/passwd", "http(s)"),
]


async def _resolve(host: str, port: int) -> list:
    if host not in NAMES:
        raise OutboundRefused(f"{host} is not in this test's table")
    return [ipaddress.ip_address(NAMES[host])]


def _policy(allow: str = "") -> OutboundPolicy:
    return OutboundPolicy.parse(allow, resolver=_resolve)


Way = Callable[[OutboundPolicy, str, FetchLimits], Awaitable[bytes]]


async def _crawler_get(policy: OutboundPolicy, url: str, limits: FetchLimits) -> bytes:
    client = GuardedClient(policy, limits)
    try:
        return (await client.get(url)).body
    finally:
        await client.aclose()


async def _injection_post(policy: OutboundPolicy, url: str, limits: FetchLimits) -> bytes:
    client = GuardedClient(policy, limits)
    try:
        json_headers = {"Content-Type": "application/json"}
        return (await client.request("POST", url, content=b'{"q": 1}', headers=json_headers)).body
    finally:
        await client.aclose()


async def _transport_client(policy: OutboundPolicy, url: str, limits: FetchLimits) -> bytes:
    """As the reranker goes out (and any httpx client handed the transport, redirects followed by httpx)."""
    transport = GuardedTransport(policy, limits.max_bytes)
    async with httpx.AsyncClient(transport=transport, follow_redirects=True, max_redirects=limits.max_redirects,
                                 timeout=limits.timeout_s, trust_env=False) as client:
        try:
            async with asyncio.timeout(limits.timeout_s):
                response = await client.post(url, content=b"{}")
        except OutboundBlocked as exc:
            raise exc.refusal from None
        except httpx.InvalidURL as exc:  # httpx itself refuses some spellings (0177.0.0.1) before sending
            raise OutboundRefused(f"{exc} (loopback)") from None
        except httpx.RemoteProtocolError as exc:  # ... in a Location header too
            raise OutboundRefused(str(exc)) from None
        except OutboundTooLarge as exc:
            raise FetchTooLarge(url, str(exc)) from None
        except (httpx.TooManyRedirects, TimeoutError) as exc:
            raise FetchFailed(url, type(exc).__name__) from None
        return response.content


WAYS = pytest.mark.parametrize("way", [_crawler_get, _injection_post, _transport_client],
                               ids=["crawler", "data-injection", "reranker-transport"])
LIMITS = FetchLimits(timeout_s=2.0, max_bytes=10_000, max_redirects=3, retries=0)


def _fresh(website: Website, **pages: str) -> Website:
    website.pages.clear()
    website.requests.clear()
    for path, body in pages.items():
        website.add(f"/{path}", body)
    return website


@pytest.fixture(scope="module")
def _sink_server():
    website = Website()
    with LiveServer(website.app()) as server:
        website.port = server.port
        yield website


@pytest.fixture(scope="module")
def _site_server():
    website = Website()
    with LiveServer(website.app(), host="127.0.0.2") as server:
        website.url = server.url
        yield website


@pytest.fixture
def sink(_sink_server):
    """A server on 127.0.0.1 that must never be reached by a refused request."""
    return _fresh(_sink_server, hit="reached")


@pytest.fixture
def site(_site_server):
    """The allow-listed site, on another loopback address (127.0.0.2), that redirects."""
    return _fresh(_site_server, ok="fine")


@WAYS
@pytest.mark.parametrize(("url", "reason"), REFUSED, ids=[u for u, _ in REFUSED])
async def test_every_spelling_of_a_forbidden_address_is_refused(way, url, reason):
    with pytest.raises(OutboundRefused, match=reason.replace("(", r"\(").replace(")", r"\)")):
        await way(_policy(), url, LIMITS)


REDIRECT_TARGETS = [
    "http://127.1:{port}/hit",
    "http://2130706433:{port}/hit",
    "http://0x7f.0.0.1:{port}/hit",
    "http://0177.0.0.1:{port}/hit",
    "http://[::ffff:127.0.0.1]:{port}/hit",
    "http://localhost:{port}/hit",
    "http://rebound.test:{port}/hit",
    "//127.0.0.1:{port}/hit",  # relative (scheme-relative) to another host
    "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/",
    "http://10.0.0.1/",
    "http://[fd00::1]/",
    "http://100.64.0.1/",
]


@WAYS
@pytest.mark.parametrize("status", [301, 302, 307, 308])
@pytest.mark.parametrize("target", REDIRECT_TARGETS)
async def test_a_redirect_to_a_forbidden_address_is_refused_before_it_is_sent(way, status, target, site, sink):
    site.add("/jump", location=target.format(port=sink.port), statuses=[status])
    with pytest.raises(OutboundRefused):
        await way(_policy("127.0.0.2"), f"{site.url}/jump", LIMITS)
    assert site.paths() == ["/jump"]
    assert sink.requests == []


@WAYS
@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_redirects_within_the_allowed_site_are_followed_relative_and_absolute(way, status, site):
    site.add("/a", location="/b", statuses=[status])
    site.add("/b", location=f"{site.url}/ok", statuses=[status])
    assert await way(_policy("127.0.0.2"), f"{site.url}/a", LIMITS) == b"fine"
    assert site.paths() == ["/a", "/b", "/ok"]


@WAYS
async def test_a_redirect_chain_longer_than_the_cap_fails(way, site):
    for n in range(5):
        site.add(f"/r{n}", location=f"/r{n + 1}", statuses=[302])
    with pytest.raises(FetchFailed):
        await way(_policy("127.0.0.2"), f"{site.url}/r0", LIMITS)
    assert site.paths() == ["/r0", "/r1", "/r2", "/r3"]  # the cap is 3 redirects


@WAYS
async def test_allowed_when_allow_listed(way, sink):
    for allow in ("127.0.0.0/8", "127.0.0.1", "localhost"):
        assert await way(_policy(allow), f"http://localhost:{sink.port}/hit", LIMITS) == b"reached"
    assert await way(_policy("127.0.0.0/8"), f"http://0x7f.0.0.1:{sink.port}/hit", LIMITS) == b"reached"
    assert await way(_policy("127.0.0.0/8"), f"http://rebound.test:{sink.port}/hit", LIMITS) == b"reached"
    assert len(sink.requests) == 5
    with pytest.raises(OutboundRefused, match="metadata"):  # allowing loopback allows nothing else
        await way(_policy("127.0.0.0/8"), "http://169.254.169.254/", LIMITS)


@WAYS
async def test_a_redirect_to_an_allow_listed_address_is_followed(way, site, sink):
    site.add("/jump", location=f"http://127.1:{sink.port}/hit", statuses=[302])
    assert await way(_policy("127.0.0.2, 127.0.0.1"), f"{site.url}/jump", LIMITS) == b"reached"
    assert len(sink.requests) == 1


def _slow_and_large() -> Starlette:
    async def chunks(size: int, pause_s: float):
        for _ in range(size // 1000):
            await asyncio.sleep(pause_s)
            yield b"x" * 1000

    async def huge(request):
        return Response(b"x" * 50_000)  # declares its length

    async def endless(request):
        return StreamingResponse(chunks(1_000_000, 0))  # no length: counted while read

    async def slow(request):
        return StreamingResponse(chunks(3000, 0.4))

    return Starlette(routes=[Route(p, f, methods=["GET", "POST"])
                             for p, f in (("/huge", huge), ("/endless", endless), ("/slow", slow))])


@pytest.fixture(scope="module")
def capped():
    with LiveServer(_slow_and_large()) as server:
        yield server.url


@WAYS
@pytest.mark.parametrize("path", ["/huge", "/endless"])
async def test_the_size_cap_is_enforced(way, path, capped):
    with pytest.raises(FetchTooLarge, match="10000"):
        await way(_policy("127.0.0.1"), capped + path, LIMITS)


@WAYS
async def test_the_time_cap_is_enforced(way, capped):
    limits = FetchLimits(timeout_s=0.3, max_bytes=10_000, retries=0)
    started = asyncio.get_running_loop().time()
    with pytest.raises(FetchFailed):
        await way(_policy("127.0.0.1"), capped + "/slow", limits)
    assert asyncio.get_running_loop().time() - started < 1.0  # the body would take 1.2 s

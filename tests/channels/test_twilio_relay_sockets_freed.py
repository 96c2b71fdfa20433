"""Closed relay sockets leave nothing behind (issue 38: "500 idle sockets are closed by the idle limit
and the cap, with the gateway's RSS back to where it was"): after sockets closed by the cap, the idle
limit and a refused upgrade, the relay's counts are empty, uvicorn holds no task or connection for them,
and no protocol object of theirs is left for the cyclic collector, which the gateway runs rarely.

A frame past the server's WebSocket bound is closed (1009) by the server before the relay reads it, and
the relay logs and counts it like its own refusals. The server runs with the options ``switchboard
serve`` gives uvicorn (``gateway.http.server``)."""

from __future__ import annotations

import collections
import gc
import time
from collections.abc import Iterator

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from gateway.http.app import create_app
from gateway.http.server import serve_options
from tests.channels.conftest import metric, wait_until
from tests.channels.relay_client import incoming_call, open_url, setup, signature, socket
from tests.fakes.live_server import LiveServer

CALLERS = ["+15550000201", "+15550000202", "+15550000203"]
PROTOCOLS = ("HttpToolsProtocol", "WebSocketsSansIOProtocol", "ServerProtocol", "TCPTransport")
FRAME = 'switchboard_rejected_requests_total{channel="twilio_relay",reason="frame"}'


@pytest.fixture
def channel_overrides() -> dict:
    return {"twilio_voice_mode": "relay", "twilio_relay_setup_timeout_s": 5.0, "twilio_relay_idle_timeout_s": 0.8,
            "twilio_relay_max_sockets": 4, "twilio_relay_max_sockets_per_caller": 2}


@pytest.fixture
def served(channel_settings) -> Iterator[LiveServer]:
    with LiveServer(create_app(channel_settings), **serve_options(channel_settings)) as server:
        yield server


@pytest.fixture
def no_collector() -> Iterator[None]:
    """As in a gateway between its rare full collections: what only the cyclic collector frees stays."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def _alive() -> collections.Counter:
    """Server-side connection objects (and subclasses) the collector tracks, reachable or not."""
    alive: collections.Counter = collections.Counter()
    for obj in gc.get_objects():
        for kind in type(obj).__mro__:
            if kind.__name__ in PROTOCOLS:
                alive[kind.__name__] += 1
    return alive


def _close_code(ws, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ws.recv(timeout=max(0.01, deadline - time.monotonic()))
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else 1006
    raise AssertionError("the gateway did not close the socket")


def test_sockets_closed_by_the_cap_the_idle_limit_or_refused_leave_nothing_behind(served, no_collector):
    relay = served.server.config.app.state.channels["twilio_relay"]
    state = served.server.server_state
    calls = [(f"CA{n:032d}", CALLERS[n % 3]) for n in range(6)]
    urls = [incoming_call(served, sid, caller) for sid, caller in calls]  # the signed webhooks first
    wait_until(lambda: not state.connections, what="the webhooks' connections closed")
    before = _alive()
    sockets = [open_url(served, url, {"X-Twilio-Signature": signature(url)}) for url in urls]
    for ws, (sid, caller) in zip(sockets, calls, strict=True):
        try:
            setup(ws, sid, caller)
        except ConnectionClosed:
            pass  # past the cap: closed at once
    with pytest.raises(InvalidStatus):  # a captured URL, a second time: refused before any accept
        open_url(served, urls[0], {"X-Twilio-Signature": signature(urls[0])})
    codes = collections.Counter(_close_code(ws) for ws in sockets)
    assert codes == {1000: 4, 1013: 2}  # four idle past the limit, two past the cap of four
    for ws in sockets:
        ws.close()

    def freed() -> bool:
        return (relay.open.total == 0 and not relay.open.by_caller and not state.tasks
                and not state.connections and _alive() == before)

    try:
        wait_until(freed, timeout=10, what="every socket's objects freed")
    except AssertionError:
        left = _alive() - before
        raise AssertionError(f"left behind: {dict(left)}; relay counts {relay.open.total} {relay.open.by_caller}; "
                             f"server tasks {len(state.tasks)}, connections {len(state.connections)}") from None


@pytest.mark.parametrize("channel_overrides", [{"twilio_voice_mode": "relay", "max_body_bytes": 100_000}])
def test_a_frame_past_the_servers_bound_is_closed_there_and_counted_by_the_relay(served, fake_openai, caplog):
    with httpx.Client(base_url=served.url, timeout=10) as client:
        refused = metric(client, FRAME)
        with socket(served, max_size=None) as ws:
            setup(ws)
            ws.send("x" * 100_001)
            assert _close_code(ws) == 1009
        wait_until(lambda: metric(client, FRAME) == refused + 1, what="the refusal counted")
    assert fake_openai.chat_requests() == []
    assert any("closed (1009)" in r.getMessage() and "100000" in r.getMessage() for r in caplog.records), \
        [r.getMessage() for r in caplog.records]

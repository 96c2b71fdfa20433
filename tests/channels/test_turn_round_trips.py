"""Redis round trips per turn, counted on the wire by a proxy in front of the suite's Redis, against the
budgets in ``tests/budgets/redis_round_trips.py``. ``-s`` prints each turn's count and commands."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlparse

import httpx
import pytest

from gateway.http.app import create_app
from tests.budgets import redis_round_trips as budget
from tests.channels import vendors
from tests.channels.conftest import wait_until
from tests.fakes.live_server import LiveServer
from tests.fakes.redis_counter import RedisCounter, Traffic
from tests.gateway.agents.conftest import key_for, make_agent


@pytest.fixture
def proxy(redis_url) -> Iterator[RedisCounter]:
    if not redis_url.startswith("redis://"):
        pytest.skip("counts TCP round trips: needs a redis-server on a port")
    target = urlparse(redis_url)
    with RedisCounter(target.hostname, target.port) as counter:
        yield counter


def _quiet(proxy: RedisCounter, after: float = 0.4) -> Traffic:
    """Everything counted until nothing crossed the wire for ``after`` seconds."""
    total = Traffic()
    while True:
        time.sleep(after)
        more = proxy.take()
        if more.round_trips == 0:
            return total
        total.round_trips += more.round_trips
        total.commands.update(more.commands)
        total.trips.extend(more.trips)


def _report(entry: str, traffic: Traffic) -> str:
    trips = "\n".join(f"  {n:>2}. {' '.join(trip)}" for n, trip in enumerate(traffic.trips, 1))
    return f"{entry}: {traffic.round_trips} round trips, {traffic.command_count} commands, one line a trip:\n{trips}"


# The web chat's orphan sweep runs every half turn lease (5 s by default) in every gateway: with a 60 s lease
# it does not run inside a counted turn (it landed there by chance before: its first run is three trips). So
# with the connection listeners' read of the connections (a Discord bot's Gateway; every 2 s by default).
QUIET_SWEEP = {"turn_lock_lease_s": 60.0, "connection_listeners_poll_s": 60.0}


def _without_idle_reads(traffic: Traffic, own: int = 0) -> tuple[Traffic, int]:
    """The inbox reader's blocking reads that time out while a turn runs (one a second at most, however
    many turns run) are not the turn's: a web-chat turn or an invoke has none of its own (``own=0``), an
    inbox turn one, the read that brings its delivery. Returns the turn's traffic and how many reads were
    left out."""
    kept, idle = Traffic(), 0
    for trip in traffic.trips:
        if trip == ["XREADGROUP"]:
            if own:
                own -= 1
            else:
                idle += 1
                continue
        kept.round_trips += 1
        kept.commands.update(trip)
        kept.trips.append(trip)
    return kept, idle


def test_a_web_chat_turn(settings, proxy):
    with LiveServer(create_app(settings.model_copy(update={"redis_url": proxy.url, **QUIET_SWEEP}))) as gateway:
        client = httpx.Client(base_url=gateway.url, timeout=20)
        session = client.post("/api/chat/sessions").json()
        auth = {"Authorization": f"Bearer {session['token']}"}
        path = f"/api/chat/sessions/{session['session_id']}/messages"
        assert client.post(path, headers=auth, json={"text": "hello"}).status_code == 200  # warm: first turn
        _quiet(proxy)
        assert client.post(path, headers=auth, json={"text": "and on Sundays?"}).json()["reply"]["text"]
        traffic, idle = _without_idle_reads(_quiet(proxy))
    print(_report("web chat", traffic), f"\n  (and {idle} idle inbox read(s), not the turn's)")
    assert 0 < traffic.round_trips <= budget.WEB_CHAT_TURN, _report("web chat", traffic)


def test_an_inbox_turn(channel_settings, fake_telegram, proxy):
    with LiveServer(create_app(channel_settings.model_copy(update={"redis_url": proxy.url, **QUIET_SWEEP}))) as gateway:
        client = httpx.Client(base_url=gateway.url, timeout=20)
        for number, text in enumerate(("hello", "and on Sundays?"), start=1):
            _quiet(proxy)
            assert vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message(text))).is_success
            wait_until(lambda n=number: len(fake_telegram.sent_texts()) >= n, what="the reply")
        traffic, idle = _without_idle_reads(_quiet(proxy), own=1)
    print(_report("inbox (Telegram)", traffic), f"\n  (and {idle} idle inbox read(s), not the turn's)")
    assert 0 < traffic.round_trips <= budget.INBOX_TURN, _report("inbox", traffic)


def test_an_invoke(proxy, settings):
    with LiveServer(create_app(settings.model_copy(update={"redis_url": proxy.url, **QUIET_SWEEP}))) as counted:
        api = httpx.Client(base_url=counted.url, timeout=20)
        agent = make_agent(api, name="budget")
        caller = {"Authorization": f"Bearer {key_for(api, agent['id'])}", "X-Session-ID": str(uuid.uuid4())}
        path = f"/v1/agents/{agent['id']}/versions/latest/invoke"
        for text in ("hello", "and on Sundays?"):
            _quiet(proxy)
            answer = api.post(path, headers=caller, json={"messages": [{"role": "user", "content": text}]})
            assert answer.status_code == 200 and answer.json()["output"], answer.text
        traffic, idle = _without_idle_reads(_quiet(proxy))
    print(_report("invoke", traffic), f"\n  (and {idle} idle inbox read(s), not the turn's)")
    assert 0 < traffic.round_trips <= budget.INVOKE, _report("invoke", traffic)


def test_a_web_chat_turn_with_a_tool_call(settings, proxy, fake_openai):
    """A turn whose model calls one MCP tool: its journal and the proposed action are read with the turn lock,
    the round and its result written in one transaction (the handoff state read with it); the sources are
    listed again (one command) when the turn's process last listed them over a second ago (here: every turn)."""
    from tests.fakes.mcp_server import FakeMcpServer

    crm = FakeMcpServer()
    with LiveServer(crm.app(), graceful_timeout_s=1) as tools, LiveServer(create_app(settings.model_copy(update={
            "redis_url": proxy.url, "outbound_allow_hosts": "127.0.0.1", **QUIET_SWEEP}))) as gateway:
        admin = {"Authorization": "Bearer admin-secret"}
        client = httpx.Client(base_url=gateway.url, timeout=20)
        added = client.post("/api/tool-sources", headers=admin, json={"name": "crm", "url": tools.url + "/mcp"})
        assert added.is_success, added.text
        assert client.patch(f"/v1/agents/{settings.agent_id}", headers=admin,
                            json={"config": {"tools": [{"name": "crm.book_table"}]}}).is_success
        fake_openai.auto_tool_call = ("crm__book_table", {"party_size": 4, "day": "Friday"})
        fake_openai.echo_tool_results = True
        session = client.post("/api/chat/sessions").json()
        auth = {"Authorization": f"Bearer {session['token']}"}
        path = f"/api/chat/sessions/{session['session_id']}/messages"
        assert client.post(path, headers=auth, json={"text": "hello"}).status_code == 200  # warm: first turn
        time.sleep(1.1)  # the sources' listing is over a second old: this turn lists them again
        _quiet(proxy)
        answer = client.post(path, headers=auth, json={"text": "a table for four on Friday"}).json()
        traffic, idle = _without_idle_reads(_quiet(proxy))
    assert answer["reply"]["text"].startswith("From the tools: Booked") and len(crm.calls) == 2
    print(_report("web chat with a tool call", traffic), f"\n  (and {idle} idle inbox read(s), not the turn's)")
    assert 0 < traffic.round_trips <= budget.WEB_CHAT_TOOL_TURN, _report("web chat with a tool call", traffic)

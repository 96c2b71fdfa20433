"""Fixtures for prompt assembly and live context: in-process services on a controllable clock,
a real RQ worker with its scheduler, a signed-feed helper and the fake data source."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime

import httpx
import pytest
import redis
from pydantic import SecretStr

from gateway.core.clock import ManualClock
from gateway.http.app import create_app
from gateway.live.feeds import sign
from gateway.services import Services
from tests.fakes.data_source import DataSource
from tests.fakes.live_server import LiveServer

ADMIN = {"Authorization": "Bearer admin-secret"}
FEEDS_SECRET = "feed-secret"


@pytest.fixture
def live_settings(settings):
    return settings.model_copy(update={
        "feeds_secret": SecretStr(FEEDS_SECRET),
        "outbound_allow_hosts": "127.0.0.1",
        "data_injection_retry_intervals": [1, 1],
        "conversation_meta_delay_s": 0,
        "timer_idle_poll_s": 5,
    })


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 2, 24, 9, 0, tzinfo=UTC))


@pytest.fixture(autouse=True)
def _drop_rq_jobs(agent_id, redis_url) -> Iterator[None]:
    """Job hashes are keyed by job id (which carries the agent id), outside the agent's key prefix."""
    yield
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"rq:*{agent_id}*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
async def services(live_settings, clock) -> AsyncIterator[Services]:
    """Services on the test's loop, with the manual clock; no worker."""
    built = Services.build(live_settings, run_worker=False, clock=clock)
    built.register_jobs(asyncio.get_running_loop())
    yield built
    built.unregister_jobs()
    await built.aclose()


@pytest.fixture
async def worker_services(live_settings) -> AsyncIterator[Services]:
    """Services on the real clock with the embedded RQ worker and scheduler, started like the gateway."""
    built = Services.build(live_settings, run_worker=True)
    built.register_jobs(asyncio.get_running_loop())
    await built.start()
    yield built
    built.unregister_jobs()
    await asyncio.to_thread(built.worker.stop)
    built.worker = None
    await built.aclose()


@pytest.fixture
def live_gateway(live_settings, clock) -> Iterator[LiveServer]:
    """The real app on uvicorn, its live context on the manual clock."""
    app = create_app(live_settings, services=Services.build(live_settings, clock=clock))
    with LiveServer(app) as server:
        server.services = app.state.services
        yield server


@pytest.fixture
def admin(live_gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_gateway.url, headers=ADMIN, timeout=10) as client:
        yield client


@pytest.fixture
def data_source() -> Iterator[DataSource]:
    source = DataSource()
    with LiveServer(source.app()) as server:
        source.url = server.url + "/data"
        yield source


def signed_headers(body: bytes, *, secret: str = FEEDS_SECRET, at: float | None = None) -> dict[str, str]:
    timestamp = str(int(at if at is not None else time.time()))
    return {
        "Content-Type": "application/json",
        "X-Switchboard-Timestamp": timestamp,
        "X-Switchboard-Signature": sign(secret, timestamp, body),
    }


def feed_body(**payload) -> bytes:
    return json.dumps(payload).encode()


async def eventually(check, timeout_s: float = 10.0, interval_s: float = 0.1):
    """Await until ``check()`` (sync or async) returns something truthy; return it."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval_s)

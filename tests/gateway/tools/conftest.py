from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer
from tests.fakes.mcp_server import FakeMcpServer
from tests.fakes.shop_api import FakeShop

ADMIN = {"Authorization": "Bearer admin-secret"}
TOKEN = "crm-token-7f3a9c2e51"
SHOP_TOKEN = "shop-token-93b1d07c4e"


@pytest.fixture
def mcp_server() -> Iterator[FakeMcpServer]:
    fake = FakeMcpServer(token=TOKEN)
    with LiveServer(fake.app(), graceful_timeout_s=1) as server:
        fake.url = server.url + "/mcp"
        yield fake


@pytest.fixture
def shop() -> Iterator[FakeShop]:
    """A shop's REST API (FastAPI) serving its OpenAPI document, every request needing ``SHOP_TOKEN``."""
    fake = FakeShop(token=SHOP_TOKEN)
    with LiveServer(fake.app()) as server:
        fake.url = server.url
        yield fake


@pytest.fixture
def tool_overrides() -> dict:
    return {}  # a test parametrizes this to change settings


@pytest.fixture
def tool_settings(settings, tool_overrides):
    return settings.model_copy(update={"secret_key": SecretStr(Fernet.generate_key().decode()),
                                       "outbound_allow_hosts": "127.0.0.1", **tool_overrides})


@pytest.fixture
def live(tool_settings) -> Iterator[LiveServer]:
    with LiveServer(create_app(tool_settings)) as server:
        server.services = server.server.config.app.state.services
        yield server


@pytest.fixture
def client(live) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=30) as c:
        yield c


def add_crm(client: httpx.Client, url: str, token: str = TOKEN) -> dict:
    answer = client.post("/api/tool-sources", headers=ADMIN, json={
        "kind": "mcp", "name": "crm", "url": url, "headers": {"Authorization": f"Bearer {token}"}})
    assert answer.status_code == 201, answer.text
    return answer.json()


def ask(client: httpx.Client, text: str) -> dict:
    """A web-chat visitor's question in a new session: the turn's answer (``reply``, ``turn_id``)."""
    session = client.post("/api/chat/sessions").json()
    answer = client.post(f"/api/chat/sessions/{session['session_id']}/messages", json={"text": text},
                         headers={"Authorization": f"Bearer {session['token']}"})
    assert answer.status_code == 200, answer.text
    return answer.json()


def trace_of(client: httpx.Client, turn_id: str) -> dict:
    """The turn's trace, from the console's only conversation."""
    [listed] = client.get("/api/conversations", headers=ADMIN).json()["conversations"]
    detail = client.get(f"/api/conversations/{listed['id']}", headers=ADMIN).json()
    return next(t for t in detail["traces"] if t["turn_id"] == turn_id)

"""Helpers the connection tests share: a key, admin calls, posting to a connection's webhook."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer
from tests.fakes.telegram_api import FakeTelegram

ADMIN = {"Authorization": "Bearer admin-secret"}
SECRET_KEY = Fernet.generate_key().decode()


def add(client: httpx.Client, **body) -> dict:
    answer = client.post("/api/connections", json=body, headers=ADMIN)
    assert answer.status_code == 201, answer.text
    return answer.json()


def add_desk_agent(client: httpx.Client, name: str) -> str:
    """An agent whose system prompt names its desk (a prompt shows which agent answered); its id."""
    prompt = f"You are the {name} desk.\n{{context_str}}\nQuestion: {{query_str}}"
    answer = client.post("/v1/agents", headers=ADMIN, json={"name": name, "config": {"systemPrompt": prompt}})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def queued_keys(stored) -> dict[str, list[str]]:
    """What a delivery leaves in Redis once queued or answered: compared before and after a refused one."""
    return {kind: stored.keys(f"{kind}:*") for kind in ("msg", "dedup", "identity", "persona")}


def webhook_path(connection: dict) -> str:
    return "/" + connection["webhook_url"].split("://", 1)[1].split("/", 1)[1]


def post_update(client: httpx.Client, connection: dict, update: dict, secret: str) -> httpx.Response:
    return client.post(webhook_path(connection), json=update, headers={"X-Telegram-Bot-Api-Secret-Token": secret})


@pytest.fixture
def telegram_only() -> Iterator[FakeTelegram]:
    """A fake Telegram of its own (for tests outside tests/channels, which have no channel fixtures)."""
    fake = FakeTelegram()
    with LiveServer(fake.app()) as server:
        fake.url = server.url
        yield fake


@pytest.fixture
def channels_console(settings, telegram_only) -> Iterator[LiveServer]:
    """The console of a gateway with a secret key and the fake Telegram, no environment channel."""
    from tests.admin_ui.conftest import PASSWORD

    configured = settings.model_copy(update={
        "admin_password": SecretStr(PASSWORD), "admin_user": "root", "secret_key": SecretStr(SECRET_KEY),
        "telegram_api_base": telegram_only.url})
    with LiveServer(create_app(configured)) as server:
        yield server

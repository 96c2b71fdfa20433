"""Helpers the connection tests share: a key, admin calls, posting to a connection's webhook."""

from __future__ import annotations

import httpx
from cryptography.fernet import Fernet

ADMIN = {"Authorization": "Bearer admin-secret"}
SECRET_KEY = Fernet.generate_key().decode()


def add(client: httpx.Client, **body) -> dict:
    answer = client.post("/api/connections", json=body, headers=ADMIN)
    assert answer.status_code == 201, answer.text
    return answer.json()


def webhook_path(connection: dict) -> str:
    return "/" + connection["webhook_url"].split("://", 1)[1].split("/", 1)[1]


def post_update(client: httpx.Client, connection: dict, update: dict, secret: str) -> httpx.Response:
    return client.post(webhook_path(connection), json=update, headers={"X-Telegram-Bot-Api-Secret-Token": secret})

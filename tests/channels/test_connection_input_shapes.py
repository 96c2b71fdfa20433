"""Input a connection's routes and forms must refuse by its shape, before Redis or a vendor is asked:
a connection id that is not one (``<id>:status`` names the status hash), a malformed Telegram token."""

from __future__ import annotations

import logging

import pytest
from pydantic import SecretStr

from tests.channels.connections_support import ADMIN, SECRET_KEY, add
from tests.channels.test_secrets_exposure import _everything_in


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY)}


def test_a_connection_id_of_another_shape_is_a_404_on_every_kind_and_the_api(client, live, fake_telegram, stored,
                                                                             caplog):
    caplog.set_level(logging.INFO)
    token = fake_telegram.add_bot(7600001, "shape_bot")
    fake_telegram.recorder.fail("getMe", 502)  # saved disabled, its error in the status hash
    bot = add(client, kind="telegram", name="Shape", credentials={"bot_token": token})
    status_key = stored.services.store.key("connection", bot["id"], "status")
    assert stored.redis.type(status_key) == b"hash"
    ids = [f"{bot['id']}:status", f"{bot['id']}:status:x", "default", "../" + bot["id"], bot["id"].upper()]
    for connection_id in ids:
        for path in (f"/channels/telegram/{connection_id}/webhook", f"/channels/slack/{connection_id}/events",
                     f"/channels/twilio/{connection_id}/sms", f"/channels/whatsapp/{connection_id}",
                     f"/channels/whatsapp/{connection_id}/status"):
            answer = client.post(path, content=b"{}", headers={"content-type": "application/json"})
            assert answer.status_code == 404, (path, answer.text)
            assert answer.json()["error"] == "not_found", path
        if connection_id != "default":
            answer = client.get(f"/api/connections/{connection_id}", headers=ADMIN)
            assert answer.status_code == 404 and answer.json()["error"] == "not_found", answer.text
            assert client.patch(f"/api/connections/{connection_id}", json={"name": "x"},
                                headers=ADMIN).status_code == 404
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert client.get(f"/api/connections/{bot['id']}", headers=ADMIN).json()["name"] == "Shape"  # untouched


MALFORMED = ["not-a-token", "123:abc def", "12a:AAF-token_part", "123 :AAF-token", ":AAF-token", "123:",
             "123:abc/../getMe"]


@pytest.mark.parametrize("token", MALFORMED)
def test_a_malformed_telegram_token_is_a_422_naming_the_field_on_create_and_patch(client, live, fake_telegram,
                                                                                  stored, token):
    created = client.post("/api/connections", headers=ADMIN, json={
        "kind": "telegram", "name": "Typo", "credentials": {"bot_token": token}})
    assert created.status_code == 422, created.text
    assert created.json()["error"] == "invalid_input"
    assert created.json()["message"].startswith("credentials.bot_token: not a Telegram bot token")
    assert stored.keys("connection*") == [] and fake_telegram.recorder.calls == []

    good = fake_telegram.add_bot(7600002, "typo_bot")
    bot = add(client, kind="telegram", name="Typo", credentials={"bot_token": good})
    before = _everything_in(stored)
    patched = client.patch(f"/api/connections/{bot['id']}", json={"credentials": {"bot_token": token}},
                           headers=ADMIN)
    assert patched.status_code == 422, patched.text
    assert patched.json()["message"].startswith("credentials.bot_token: not a Telegram bot token")
    assert _everything_in(stored) == before  # nothing changed
    shown = client.get(f"/api/connections/{bot['id']}", headers=ADMIN).json()
    assert shown["credentials"]["bot_token"] == "••••" + good[-4:] and shown["enabled"]

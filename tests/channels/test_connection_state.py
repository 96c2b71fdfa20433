"""A connection has one state, said in one sentence, and every action updates it: a save that could
not reach the vendor, enabling, verifying again (passing, unreachable or refused)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from tests.channels.connections_support import ADMIN, SECRET_KEY


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY)}


def _shown(client, connection_id: str) -> dict:
    return client.get(f"/api/connections/{connection_id}", headers=ADMIN).json()


def test_every_action_leaves_one_state_and_the_last_error_of_the_last_check(client, live, fake_telegram):
    token = fake_telegram.add_bot(7100021, "moody_bot")
    fake_telegram.recorder.fail("getMe", 502, description="Bad Gateway: first outage")
    created = client.post("/api/connections", headers=ADMIN, json={
        "kind": "telegram", "name": "Moody", "credentials": {"bot_token": token}}).json()
    assert created["enabled"] is False and created["state"] == "check_failed"
    assert "first outage" in created["status"]["last_error"] and "first outage" in created["state_message"]
    assert created["state_message"].startswith("Disabled: the check with Telegram failed")
    assert fake_telegram.recorder.received("setWebhook") == []  # nothing registered, and nothing says so

    # enabling asks Telegram again; still down with another error: still disabled, the new error shown
    fake_telegram.recorder.fail("getMe", 503, description="Service Unavailable: second outage")
    enabled = client.patch(f"/api/connections/{created['id']}", json={"enabled": True}, headers=ADMIN).json()
    assert enabled["enabled"] is False and enabled["state"] == "check_failed"
    assert "second outage" in enabled["status"]["last_error"] and "second outage" in enabled["state_message"]
    assert "first outage" not in enabled["state_message"]

    # the token was revoked meanwhile: verifying again is refused, and the state says so, not the old outage
    del fake_telegram.bots[token]
    try:
        refused = client.post(f"/api/connections/{created['id']}/verify", headers=ADMIN)
        assert refused.status_code == 422
        assert refused.json()["message"] == "credentials.bot_token: Telegram refused the token"
        after = _shown(client, created["id"])
        assert after["enabled"] is False and after["state"] == "check_failed"
        assert after["status"]["last_error"] == "credentials.bot_token: Telegram refused the token"
        assert "refused the token" in after["state_message"] and "outage" not in after["state_message"]
    finally:
        fake_telegram.bots[token] = (7100021, "moody_bot")

    verified = client.post(f"/api/connections/{created['id']}/verify", headers=ADMIN).json()
    assert verified["enabled"] is True and verified["state"] == "enabled"
    assert verified["state_message"].startswith("Enabled: Telegram accepted the token and registered the webhook URL")
    assert verified["status"]["last_error"] is None and verified["status"]["check_error"] is None
    [registered] = [c for c in fake_telegram.recorder.received("setWebhook") if c.params["_bot"] == "moody_bot"]
    assert registered.params["url"] == verified["webhook_url"]

    disabled = client.patch(f"/api/connections/{created['id']}", json={"enabled": False}, headers=ADMIN).json()
    assert disabled["state"] == "disabled" and disabled["state_message"] == "Disabled: its webhook answers 404."


def test_a_working_connection_whose_token_is_revoked_is_disabled_by_the_failed_check(client, live, fake_telegram):
    token = fake_telegram.add_bot(7100022, "revoked_bot")
    created = client.post("/api/connections", headers=ADMIN, json={
        "kind": "telegram", "name": "Revoked", "credentials": {"bot_token": token}}).json()
    assert created["state"] == "enabled"
    del fake_telegram.bots[token]
    try:
        assert client.post(f"/api/connections/{created['id']}/verify", headers=ADMIN).status_code == 422
    finally:
        fake_telegram.bots[token] = (7100022, "revoked_bot")
    after = _shown(client, created["id"])
    assert after["enabled"] is False and after["state"] == "check_failed"
    assert after["status"]["last_error"] == after["status"]["check_error"] == (
        "credentials.bot_token: Telegram refused the token")
    listed = client.get("/api/connections", headers=ADMIN).json()["connections"]
    assert [c["state_message"] for c in listed if c["id"] == created["id"]] == [after["state_message"]]

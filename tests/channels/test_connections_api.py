"""/api/connections: refused input stores nothing; credentials never leave in plain text; a second
gateway process sees a new connection at once."""

from __future__ import annotations

import logging
import subprocess
import time

import httpx
import pytest
from pydantic import SecretStr

from tests.channels import vendors
from tests.channels.conftest import settle, wait_until
from tests.channels.connections_support import ADMIN, SECRET_KEY, add, post_update
from tests.channels.test_secrets_exposure import _everything_in
from tests.fakes.live_server import free_port
from tests.workers import start_gateway, stop_workers


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY)}


@pytest.mark.parametrize("body, message", [
    ({"kind": "fax", "name": "x", "credentials": {}}, "kind: unknown kind 'fax'"),
    ({"kind": "telegram", "name": "x", "credentials": {}}, "credentials.bot_token: required"),
    ({"kind": "slack", "name": "x", "credentials": {"bot_token": "xoxb-1"}}, "credentials.signing_secret: required"),
    ({"kind": "whatsapp", "name": "x", "credentials": {"account_sid": "AC1", "auth_token": "t", "sender": "+1555"}},
     "credentials.sender: a WhatsApp sender is written whatsapp:+<number>"),
    ({"kind": "telegram", "name": "x", "agent": "nobody", "credentials": {"bot_token": "1:abc"}}, "agent: no agent"),
    ({"kind": "telegram", "credentials": {"bot_token": "1:abc"}}, "name: Field required"),
])
def test_refused_input_names_the_field_and_stores_nothing(client, live, fake_telegram, stored, body, message):
    answer = client.post("/api/connections", json=body, headers=ADMIN)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] == "invalid_input" and answer.json()["message"].startswith(message)
    assert stored.keys("connection*") == [] and fake_telegram.recorder.calls == []


def test_without_a_secret_key_credentials_are_refused_and_env_channels_still_answer(
        settings, fake_telegram, fake_openai, channel_settings):
    from gateway.http.app import create_app
    from tests.fakes.live_server import LiveServer

    with LiveServer(create_app(channel_settings.model_copy(update={"secret_key": None}))) as server, \
            httpx.Client(base_url=server.url, timeout=10) as client:
        answer = client.post("/api/connections", headers=ADMIN, json={
            "kind": "telegram", "name": "x", "credentials": {"bot_token": fake_telegram.add_bot(7300001, "k_bot")}})
        assert answer.status_code == 422 and "SWITCHBOARD_SECRET_KEY" in answer.json()["message"]
        assert fake_telegram.recorder.received("getMe") == []
        vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("still here?")))
        wait_until(lambda: fake_telegram.sent_texts(), what="the environment bot's answer")
        assert fake_telegram.sent_texts() == ["echo: still here?"]


def test_a_token_never_appears_in_redis_answers_pages_or_logs(client, live, fake_telegram, fake_openai, stored,
                                                               caplog):
    caplog.set_level(logging.DEBUG)
    token = fake_telegram.add_bot(7300002, "secret_bot")
    answers = [client.post("/api/connections", headers=ADMIN, json={
        "kind": "telegram", "name": "Secret", "credentials": {"bot_token": token}})]
    bot = answers[0].json()
    [call] = [c for c in fake_telegram.recorder.received("setWebhook") if c.params["_bot"] == "secret_bot"]
    webhook_secret = call.params["secret_token"]
    post_update(client, bot, vendors.telegram_update(vendors.telegram_message("hi")), webhook_secret)
    settle(live)
    fake_telegram.recorder.fail("sendMessage", 400, description=f"Bad Request: echoing {token}")
    post_update(client, bot, vendors.telegram_update(vendors.telegram_message("again")), webhook_secret)
    settle(live)
    answers += [client.get("/api/connections", headers=ADMIN), client.get(f"/api/connections/{bot['id']}",
                                                                           headers=ADMIN),
                client.patch(f"/api/connections/{bot['id']}", json={"name": "Renamed"}, headers=ADMIN),
                client.get("/metrics")]
    logs = "\n".join(f"{r.getMessage()} {r.exc_text or ''} {r.args!r}" for r in caplog.records)
    redis_values = _everything_in(stored)
    assert "echo: hi" in redis_values and bot["id"] in redis_values  # the transcript and the record were read
    for place, text in {"redis": redis_values, "answers": "\n".join(a.text for a in answers), "logs": logs}.items():
        assert token not in text, place
        assert webhook_secret not in text, place
    assert token.split(":")[1] not in redis_values  # not even the part after the bot id
    assert f"••••{token[-4:]}" in answers[1].text


def _serve(settings, port: int) -> subprocess.Popen:
    env = {
        "SWITCHBOARD_REDIS_URL": settings.redis_url, "SWITCHBOARD_AGENT_ID": settings.agent_id,
        "SWITCHBOARD_DATA_DIR": str(settings.data_dir) + "-second", "SWITCHBOARD_QDRANT_URL": ":memory:",
        "SWITCHBOARD_EMBEDDINGS": "none", "SWITCHBOARD_LLM_BASE_URL": settings.llm_base_url,
        "SWITCHBOARD_LLM_API_KEY": "sk-test", "SWITCHBOARD_LLM_MAX_RETRIES": "0",
        "SWITCHBOARD_SECRET_KEY": SECRET_KEY, "SWITCHBOARD_PUBLIC_URL": settings.public_url,
        "SWITCHBOARD_TELEGRAM_API_BASE": settings.telegram_api_base,
    }
    return start_gateway(env, port)


def test_a_connection_added_on_one_gateway_is_answered_by_a_second_within_2_s(client, live, channel_settings,
                                                                             fake_telegram, fake_openai):
    add(client, kind="telegram", name="First", credentials={"bot_token": fake_telegram.add_bot(7300004, "first_bot")})
    port = free_port()
    second = _serve(channel_settings, port)  # it starts with one Telegram connection; the next is added below
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as other:
            token = fake_telegram.add_bot(7300003, "replica_bot")
            bot = add(client, kind="telegram", name="Replica", credentials={"bot_token": token})
            added = time.monotonic()
            [call] = [c for c in fake_telegram.recorder.received("setWebhook") if c.params["_bot"] == "replica_bot"]
            update = vendors.telegram_update(vendors.telegram_message("which replica?"))
            assert post_update(other, bot, update, call.params["secret_token"]).status_code == 200
            assert time.monotonic() - added < 2.0
            wait_until(lambda: fake_telegram.sent_by("replica_bot"), what="the reply")
            assert fake_telegram.sent_by("replica_bot") == ["echo: which replica?"]

            client.patch(f"/api/connections/{bot['id']}", json={"enabled": False}, headers=ADMIN)
            late = vendors.telegram_update(vendors.telegram_message("still on?"))
            assert post_update(other, bot, late, call.params["secret_token"]).status_code == 404
    finally:
        stop_workers(second)


def test_a_slack_app_added_as_a_connection_answers_with_its_own_signing_secret(client, live, fake_slack,
                                                                               fake_openai, stored):
    from tests.fakes import slack_api

    secret = "c0ffee" * 6
    slack = add(client, kind="slack", name="Workspace", credentials={"bot_token": slack_api.TOKEN,
                                                                     "signing_secret": secret})
    assert slack["status"]["account"] == "switchboard in Test" and slack["enabled"]
    path = f"/channels/slack/{slack['id']}/events"
    assert slack["webhook_url"].endswith(path)
    envelope = vendors.slack_envelope(vendors.slack_event("<@U0BOT0001> do you rent tandems?"))
    assert vendors.post_slack(client, envelope, path=path).status_code == 401  # the environment app's secret
    assert vendors.post_slack(client, envelope, secret=secret, path=path).status_code == 200
    settle(live)
    assert fake_slack.sent_texts() == ["echo: do you rent tandems?"]
    stored_messages = stored.messages(f"slack:{slack_api.TEAM_ID}/U0ADA0001@{slack['id']}")
    assert [m.text for m in stored_messages] == ["do you rent tandems?", "echo: do you rent tandems?"]
    refused = client.post("/api/connections", headers=ADMIN, json={
        "kind": "slack", "name": "x", "credentials": {"bot_token": "xoxb-wrong", "signing_secret": "s" * 32}})
    assert refused.status_code == 422 and "Slack refused the token (invalid_auth)" in refused.json()["message"]


def test_voice_connections_are_checked_with_twilio(client, live, fake_twilio, stored):
    from tests.fakes import twilio_api

    voice = add(client, kind="twilio_voice", name="Phone", credentials={
        "account_sid": twilio_api.ACCOUNT_SID, "auth_token": twilio_api.AUTH_TOKEN, "phone_number": "+15550002222"})
    assert voice["status"]["verified_at"] and voice["status"]["account"].startswith("Account ")
    assert [k for k in stored.keys("connection:*") if k.count(":") == 3] == [stored.services.store.key(
        "connection", voice["id"])]


def test_a_removed_key_makes_its_connections_unusable_not_a_500(client, live, fake_telegram, channel_settings):
    from cryptography.fernet import Fernet

    from gateway.http.app import create_app
    from tests.fakes.live_server import LiveServer

    token = fake_telegram.add_bot(7300005, "rotated_bot")
    bot = add(client, kind="telegram", name="Rotated", credentials={"bot_token": token})
    secret = [c for c in fake_telegram.recorder.received("setWebhook") if c.params["_bot"] == "rotated_bot"]
    wrong = channel_settings.model_copy(update={"secret_key": SecretStr(Fernet.generate_key().decode())})
    with LiveServer(create_app(wrong)) as server, httpx.Client(base_url=server.url, timeout=10) as other:
        assert other.get(f"/api/connections/{bot['id']}", headers=ADMIN).status_code == 503
        assert bot["id"] not in other.get("/api/connections", headers=ADMIN).text
        update = vendors.telegram_update(vendors.telegram_message("hi"))
        assert post_update(other, bot, update, secret[0].params["secret_token"]).status_code == 404
    # the old key after the new one (rotation): readable again, and re-sealed under the newest at start
    rotated = channel_settings.model_copy(update={"secret_key": SecretStr(
        wrong.secret_key.get_secret_value() + "," + SECRET_KEY)})
    with LiveServer(create_app(rotated)) as server, httpx.Client(base_url=server.url, timeout=10) as other:
        assert other.get(f"/api/connections/{bot['id']}", headers=ADMIN).json()["status"]["account"] == "@rotated_bot"
    only_new = channel_settings.model_copy(update={"secret_key": wrong.secret_key})
    with LiveServer(create_app(only_new)) as server, httpx.Client(base_url=server.url, timeout=10) as other:
        assert other.get(f"/api/connections/{bot['id']}", headers=ADMIN).json()["name"] == "Rotated"

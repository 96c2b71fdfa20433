"""Key rotation re-encrypts every record it can and names each one it cannot; ``switchboard connections
check-keys`` (and the Channels screen) say whether an older key can go before anyone removes it."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys

import httpx
import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr
from redis.asyncio import Redis

import channels.telegram.connection  # noqa: F401 - imported here once, not inside a gateway's 20 s start-up
from gateway.connections.model import Connection
from gateway.connections.secrets import CredentialBox
from gateway.connections.store import ConnectionStore
from gateway.conversation.store import RedisStore
from gateway.http.app import create_app
from tests.admin_ui.conftest import PASSWORD, sign_in
from tests.fakes.live_server import LiveServer

OLD, NEW, LOST = (Fernet.generate_key().decode() for _ in range(3))  # LOST: a key nobody configures any more


def _in_store(settings, keys: str, call):
    async def run():
        redis = Redis.from_url(settings.redis_url)
        try:
            return await call(ConnectionStore(RedisStore(redis, settings.agent_id), CredentialBox(keys)))
        finally:
            await redis.aclose()
    return asyncio.run(run())


def _add(settings, keys: str, count: int, prefix: str) -> list[str]:
    async def save(store: ConnectionStore) -> list[str]:
        saved = [await store.save(Connection(kind="telegram", name=f"{prefix} {n}",
                                             credentials={"bot_token": f"{7000 + n}:{prefix}-token-{n}"}))
                 for n in range(count)]
        return [c.id for c in saved]
    return _in_store(settings, keys, save)


def _tokens(settings, keys: str) -> dict[str, str]:
    """Each connection's bot token as a store with only ``keys`` reads it (unreadable ones left out)."""
    async def read(store: ConnectionStore) -> dict[str, str]:
        return {c.id: c.credentials["bot_token"] for c in await store.list()}
    return _in_store(settings, keys, read)


@pytest.fixture
def mixed(settings):
    """Ten connections under the old key, one under a key no longer configured, one damaged record."""
    old = _add(settings, OLD, 10, "old")
    lost = _add(settings, LOST, 1, "lost")[0]
    damaged = "c_damaged"

    async def damage(store: ConnectionStore) -> None:
        await store.redis.set(store.store.key("connection", damaged), b"{not json")
        await store.redis.sadd(store.store.key("connections"), damaged)
    _in_store(settings, OLD, damage)
    return old, lost, damaged


def test_rotation_reencrypts_every_record_it_can_and_names_the_others(settings, mixed):
    old, lost, damaged = mixed
    before = _tokens(settings, f"{NEW},{OLD}")
    report = _in_store(settings, f"{NEW},{OLD}", lambda store: store.rotate_keys())
    assert sorted(report.resealed) == sorted(old)
    reasons = {r.connection_id: r.reason for r in report.unreadable}
    assert reasons.keys() == {lost, damaged}
    assert reasons[lost] == "no key in SWITCHBOARD_SECRET_KEY decrypts the stored credentials"
    assert reasons[damaged].startswith("the stored record is damaged")
    assert not report.older_keys_removable and "2 that no configured key opens" in report.summary()
    # the old key can go: every record it opened now opens with the newest key alone, unchanged
    assert _tokens(settings, NEW) == {i: before[i] for i in old}


def test_a_gateway_start_logs_each_record_it_could_not_reencrypt_and_the_console_shows_it(settings, mixed,
                                                                                           caplog):
    old, lost, damaged = mixed
    configured = settings.model_copy(update={"secret_key": SecretStr(f"{NEW},{OLD}"),
                                             "admin_password": SecretStr(PASSWORD), "admin_user": "root"})
    with caplog.at_level(logging.INFO, logger="gateway"), LiveServer(create_app(configured)) as server, \
            httpx.Client(base_url=server.url, timeout=20) as client:
        sign_in(client)
        page = client.get("/admin/channels").text
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("gateway.services")]
    assert f"connections: {lost} could not be re-encrypted: no key in SWITCHBOARD_SECRET_KEY decrypts" in \
        "\n".join(lines)
    assert any(line.startswith(f"connections: {damaged} could not be re-encrypted: the stored record is damaged")
               for line in lines)
    assert any("re-encrypted 10 connection(s)" in line for line in lines)
    assert not any(line.rstrip().endswith(":") for line in lines)  # no reason left empty
    assert "Secret keys" in page and f"{lost} (telegram): UNREADABLE" in page and damaged in page
    assert "0 only under an older key" not in page and "10 under the newest key" in page
    assert _tokens(settings, NEW).keys() == set(old)


def _cli(settings, command: str, keys: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SWITCHBOARD_REDIS_URL": settings.redis_url, "SWITCHBOARD_AGENT_ID": settings.agent_id,
           "SWITCHBOARD_DATA_DIR": str(settings.data_dir), "SWITCHBOARD_EMBEDDINGS": "none",
           "SWITCHBOARD_SECRET_KEY": keys, "SWITCHBOARD_ENV_FILE": os.devnull}
    return subprocess.run([sys.executable, "-m", "gateway", "connections", command], env=env,
                          capture_output=True, text=True, timeout=60)


def test_check_keys_says_when_an_older_key_can_be_removed(settings):
    ids = _add(settings, OLD, 3, "old")
    before = _cli(settings, "check-keys", f"{NEW},{OLD}")
    assert before.returncode == 1, before.stderr
    for connection_id in ids:
        assert f"{connection_id} (telegram): opens only with key 2 (an older one)" in before.stdout
    assert "Removing the older keys now would leave 3 connection(s) unreadable" in before.stdout
    assert _tokens(settings, NEW) == {}  # checking changed nothing

    rotated = _cli(settings, "rotate-keys", f"{NEW},{OLD}")
    assert rotated.returncode == 0 and "re-encrypted under the newest key:" in rotated.stdout, rotated.stderr
    after = _cli(settings, "check-keys", f"{NEW},{OLD}")
    assert after.returncode == 0 and "older keys can be removed" in after.stdout
    assert all(f"{i} (telegram): opens with key 1 (the newest)" in after.stdout for i in ids)

    lost = _add(settings, LOST, 1, "lost")[0]
    unreadable = _cli(settings, "check-keys", NEW)
    assert unreadable.returncode == 1 and f"{lost} (telegram): UNREADABLE" in unreadable.stdout
    for secret in ("old-token", "lost-token", NEW, OLD):
        assert secret not in unreadable.stdout + unreadable.stderr + after.stdout + before.stdout

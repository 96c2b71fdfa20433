"""Embedded mode needs no SWITCHBOARD_SECRET_KEY to connect a channel: the first start generates a key
into the data dir (0600), says so once, and the gateway and ``switchboard connections`` both use it.
With an external Redis the key stays required."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys

import httpx
from cryptography.fernet import Fernet
from pydantic import SecretStr

import channels.telegram.connection  # noqa: F401 - imported here once, not inside a gateway's 20 s start-up
from gateway.http.app import create_app
from tests.admin_ui.conftest import PASSWORD, sign_in
from tests.channels.connections_support import ADMIN, telegram_only  # noqa: F401 - a fixture
from tests.conftest import make_settings
from tests.fakes.live_server import LiveServer


def _generated(records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records if "generated the key that encrypts channel credentials" in
            r.getMessage()]


def _check_keys(data_dir) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    env.update({"SWITCHBOARD_DATA_DIR": str(data_dir), "SWITCHBOARD_EMBEDDINGS": "none",
                "SWITCHBOARD_ENV_FILE": os.devnull})
    return subprocess.run([sys.executable, "-m", "gateway", "connections", "check-keys"], env=env,
                          capture_output=True, text=True, timeout=60)


def test_embedded_mode_generates_a_key_once_and_the_cli_agrees(tmp_path, telegram_only, caplog):  # noqa: F811
    data = tmp_path / "data"
    embedded = make_settings(data_dir=data, redis_url=None, qdrant_url=None, admin_token="admin-secret",
                             admin_password=SecretStr(PASSWORD), admin_user="root",
                             telegram_api_base=telegram_only.url)
    key_file = data / "secret.key"
    with caplog.at_level(logging.INFO, logger="gateway"), LiveServer(create_app(embedded)) as server, \
            httpx.Client(base_url=server.url, timeout=30) as client:
        token = telegram_only.add_bot(7400001, "shop_bot")
        added = client.post("/api/connections", headers=ADMIN, json={
            "kind": "telegram", "name": "Shop", "credentials": {"bot_token": token}})
        assert added.status_code == 201, added.text
        assert added.json()["status"]["account"] == "@shop_bot"
        sign_in(client)
        page = client.get("/admin/channels").text
        assert f"encrypted with a key generated at <code>{key_file}</code>" in page
        assert "SWITCHBOARD_SECRET_KEY is not set" not in page
        checked = _check_keys(data)  # the CLI, beside the running gateway, reads the same key
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_text().strip()
    Fernet(key)  # a real key
    [said] = _generated(caplog.records)
    assert str(key_file) in said and key not in said and "Back it up" in said
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"keys: 1 from the generated key in {key_file}" in checked.stdout
    assert f"{added.json()['id']} (telegram): opens with key 1 (the newest)" in checked.stdout
    assert key not in checked.stdout

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="gateway"), LiveServer(create_app(embedded)) as server, \
            httpx.Client(base_url=server.url, timeout=30) as client:
        again = client.get(f"/api/connections/{added.json()['id']}", headers=ADMIN)
        assert again.status_code == 200 and again.json()["name"] == "Shop"
    assert _generated(caplog.records) == [] and key_file.read_text().strip() == key  # said once, kept


def test_a_key_of_ones_own_takes_over_and_the_generated_one_stays_readable(tmp_path, telegram_only):  # noqa: F811
    data = tmp_path / "data"
    base = make_settings(data_dir=data, redis_url=None, qdrant_url=None, admin_token="admin-secret",
                         telegram_api_base=telegram_only.url)
    with LiveServer(create_app(base)) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        token = telegram_only.add_bot(7400002, "own_bot")
        bot = client.post("/api/connections", headers=ADMIN, json={
            "kind": "telegram", "name": "Shop", "credentials": {"bot_token": token}})
        assert bot.status_code == 201, bot.text
    own = Fernet.generate_key().decode()
    with LiveServer(create_app(base.model_copy(update={"secret_key": SecretStr(own)}))) as server, \
            httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.get(f"/api/connections/{bot.json()['id']}", headers=ADMIN).json()["name"] == "Shop"
    # re-encrypted under the own key at that start: the generated file is no longer needed
    (data / "secret.key").unlink()
    with LiveServer(create_app(base.model_copy(update={"secret_key": SecretStr(own)}))) as server, \
            httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.get(f"/api/connections/{bot.json()['id']}", headers=ADMIN).json()["name"] == "Shop"
    assert not (data / "secret.key").exists()  # a configured key: nothing generated


def test_with_an_external_redis_the_key_stays_required(settings, telegram_only):  # noqa: F811
    with LiveServer(create_app(settings.model_copy(update={"telegram_api_base": telegram_only.url}))) as server, \
            httpx.Client(base_url=server.url, timeout=30) as client:
        refused = client.post("/api/connections", headers=ADMIN, json={
            "kind": "telegram", "name": "Shop", "credentials": {"bot_token": telegram_only.add_bot(7400003, "x_bot")}})
    assert refused.status_code == 422
    assert refused.json()["message"].startswith("credentials: set SWITCHBOARD_SECRET_KEY before adding a connection")
    assert not (settings.data_dir / "secret.key").exists() and telegram_only.recorder.calls == []


def test_a_damaged_key_file_stops_the_start_with_one_line_saying_what_to_do(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "secret.key").write_text("not a key\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    env.update({"SWITCHBOARD_DATA_DIR": str(data), "SWITCHBOARD_EMBEDDINGS": "none",
                "SWITCHBOARD_QDRANT_URL": ":memory:", "SWITCHBOARD_ENV_FILE": os.devnull})
    for command in (["serve", "--port", "0"], ["connections", "check-keys"]):
        done = subprocess.run([sys.executable, "-m", "gateway", *command], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert f"switchboard: {data / 'secret.key'} holds no Fernet key; restore it from a backup" in done.stderr
    assert (data / "secret.key").read_text() == "not a key\n"  # left for the operator to restore

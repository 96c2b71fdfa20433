"""`switchboard serve --port N` without SWITCHBOARD_PUBLIC_URL shows the URLs of the address it is
bound to, and the screens that show webhook URLs say a vendor needs a public one."""

from __future__ import annotations

import os
import signal
import subprocess

import httpx
import pytest

from tests.admin_ui.conftest import PASSWORD, sign_in
from tests.fakes.live_server import free_port
from tests.workers import start_gateway

ADMIN = {"Authorization": "Bearer admin-secret"}


def _serve(tmp_path, port: int, **settings: str) -> subprocess.Popen:
    env = {"SWITCHBOARD_DATA_DIR": str(tmp_path / "data"), "SWITCHBOARD_EMBEDDINGS": "none",
           "SWITCHBOARD_QDRANT_URL": ":memory:", "SWITCHBOARD_ADMIN_TOKEN": "admin-secret",
           "SWITCHBOARD_ADMIN_USER": "root", "SWITCHBOARD_ADMIN_PASSWORD": PASSWORD,
           "SWITCHBOARD_TWILIO_ACCOUNT_SID": "AC" + "0" * 32, "SWITCHBOARD_TWILIO_AUTH_TOKEN": "t" * 32,
           "SWITCHBOARD_TWILIO_FROM_NUMBER": "+15550001111", "SWITCHBOARD_LOG_LEVEL": "WARNING", **settings}
    return start_gateway(env, port, cwd=tmp_path, unset=("SWITCHBOARD_PUBLIC_URL",))


def _stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_urls_name_the_port_the_gateway_serves_on(tmp_path):
    port = free_port()
    proc = _serve(tmp_path, port)
    base = f"http://127.0.0.1:{port}"
    try:
        listed = httpx.get(f"{base}/api/connections", headers=ADMIN).json()["connections"]
        sms = next(c for c in listed if c["kind"] == "twilio_sms")
        assert sms["webhook_url"] == f"{base}/channels/twilio/sms"
        with httpx.Client(base_url=base, timeout=30) as console:
            sign_in(console)
            for screen in ("/admin", "/admin/channels"):
                shown = console.get(screen).text
                assert f"{base}/channels/twilio/sms" in shown and ":8000" not in shown, screen
                assert 'id="public-url-note"' in shown and "A public URL while developing" in shown, screen
                assert f"<code>{base}</code> is\n  only this machine" in shown
    finally:
        _stop(proc)



@pytest.mark.parametrize(("url", "reachable"), [
    ("https://bot.example.com", True), ("https://203.0.113.9.nip.io", True), ("https://8.8.8.8", True),
    ("http://bot.example.com", False), ("https://127.0.0.1:8443", False), ("https://localhost", False),
    ("https://192.168.1.20", False), ("http://127.0.0.1:8301", False), ("https://[::1]:8443", False),
])
def test_which_addresses_the_screens_call_reachable_by_vendors(url, reachable):
    from admin_ui.public_url import reachable_by_vendors

    assert reachable_by_vendors(url) is reachable

"""The suite runs on what it sets up itself: no developer `.env` or environment, its own Redis."""

from __future__ import annotations

import gc
import os
import weakref

from gateway.core.settings import Settings
from gateway.http.app import create_app
from tests.conftest import TEST_REDIS_URL, forget_stopped_apps
from tests.fakes.live_server import LiveServer


def test_a_developers_env_file_does_not_reach_the_settings_tests_build(tmp_path, monkeypatch):
    (tmp_path / ".env").write_text("SWITCHBOARD_AGENT_ID=from-dotenv\nSWITCHBOARD_OUTBOUND_ALLOW_HOSTS=127.0.0.1\n")
    monkeypatch.chdir(tmp_path)
    settings = Settings.load()
    assert settings.agent_id == "default" and settings.outbound_allow_hosts == ""
    # The file is read where no one turned it off, as a user's gateway reads it.
    monkeypatch.setenv("SWITCHBOARD_ENV_FILE", ".env")
    assert Settings.load().agent_id == "from-dotenv"
    monkeypatch.setenv("SWITCHBOARD_ENV_FILE", str(tmp_path / ".env"))
    monkeypatch.chdir("/")
    assert Settings.load().outbound_allow_hosts == "127.0.0.1"


def test_no_switchboard_or_openai_variable_of_the_developer_is_left():
    leaked = sorted(name for name in os.environ if name.startswith(("SWITCHBOARD_", "OPENAI_")))
    assert leaked == ["SWITCHBOARD_ENV_FILE"]


def test_the_suite_runs_its_own_redis_unless_told(redis_url):
    if TEST_REDIS_URL:
        assert redis_url == TEST_REDIS_URL
    else:
        assert not redis_url.startswith("redis://127.0.0.1:6379"), redis_url


def test_a_stopped_gateway_is_garbage_after_its_test(settings):
    """Hundreds of gateways start and stop in one test process: none may outlive its test (each would be
    walked by every full garbage collection after it, and every gateway start runs one)."""
    with LiveServer(create_app(settings)) as server:
        services = weakref.ref(server.server.config.app.state.services)
    del server
    forget_stopped_apps()  # what the suite does after every test
    gc.collect()
    assert services() is None, "something still holds the stopped gateway's services"

"""Two `switchboard serve` replicas hold one Discord Gateway connection between them; when its holder is
SIGKILLed the other takes it over within the lease (well within 30 s), resumes the session and answers
what comes next, and nothing is answered twice."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import httpx
from pydantic import SecretStr

from tests.channels.conftest import wait_until
from tests.channels.connections_support import SECRET_KEY, add
from tests.fakes import discord_api
from tests.fakes.live_server import free_port
from tests.workers import start_gateway, stop_workers

LEASE_S = 3  # the default is 15 s; the takeover must come within 30 s either way


def _serve(settings, port: int, name: str) -> subprocess.Popen:
    return start_gateway({
        "SWITCHBOARD_REDIS_URL": settings.redis_url, "SWITCHBOARD_AGENT_ID": settings.agent_id,
        "SWITCHBOARD_DATA_DIR": f"{settings.data_dir}-{name}", "SWITCHBOARD_QDRANT_URL": ":memory:",
        "SWITCHBOARD_EMBEDDINGS": "none", "SWITCHBOARD_LLM_BASE_URL": settings.llm_base_url,
        "SWITCHBOARD_LLM_API_KEY": "sk-test", "SWITCHBOARD_LLM_MAX_RETRIES": "0",
        "SWITCHBOARD_SECRET_KEY": SECRET_KEY, "SWITCHBOARD_ADMIN_TOKEN": "admin-secret",
        "SWITCHBOARD_DISCORD_API_BASE": settings.discord_api_base,
        "SWITCHBOARD_DISCORD_GATEWAY_URL": settings.discord_gateway_url,
        "SWITCHBOARD_DISCORD_GATEWAY_LEASE_S": str(LEASE_S), "SWITCHBOARD_LOG_LEVEL": "WARNING",
    }, port)


def test_two_replicas_hold_one_gateway_connection_and_the_second_takes_over_a_killed_holder(
        channel_settings, fake_discord, fake_openai):
    settings = channel_settings.model_copy(update={"secret_key": SecretStr(SECRET_KEY)})
    fake_discord.add_bot()
    first = second = None
    try:
        first_port = free_port()
        first = _serve(settings, first_port, "first")
        with httpx.Client(base_url=f"http://127.0.0.1:{first_port}", timeout=10) as client:
            add(client, kind="discord", name="Replicated", credentials={
                "bot_token": discord_api.TOKEN, "application_id": discord_api.APPLICATION_ID,
                "public_key": discord_api.PUBLIC_KEY})
        wait_until(lambda: fake_discord.open_sockets() == 1, 20, "the first replica's Gateway session")
        [session] = fake_discord.sessions

        second = _serve(settings, free_port(), "second")
        time.sleep(LEASE_S + 2)  # several renewals and polls of both replicas
        assert fake_discord.connects == 1 and fake_discord.open_sockets() == 1 and len(fake_discord.identifies) == 1

        fake_discord.dispatch("MESSAGE_CREATE", discord_api.message("Who answers?"))
        wait_until(lambda: fake_discord.sent_texts() == ["echo: Who answers?"], 20, "the holder's answer")

        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
        killed = time.monotonic()
        wait_until(lambda: fake_discord.resumes and fake_discord.open_sockets() == 1, 30, "the takeover")
        took_over_s = time.monotonic() - killed
        assert took_over_s < 30
        assert [r["session_id"] for r in fake_discord.resumes] == [session]  # resumed, not identified again
        assert len(fake_discord.identifies) == 1

        fake_discord.dispatch("MESSAGE_CREATE", discord_api.message("And now?"))
        wait_until(lambda: len(fake_discord.sent_texts()) == 2, 20, "the second replica's answer")
        time.sleep(0.5)
        assert fake_discord.sent_texts() == ["echo: Who answers?", "echo: And now?"]
        assert len(fake_openai.chat_requests()) == 2
        print(f"taken over {took_over_s:.1f} s after the SIGKILL (lease {LEASE_S} s)")
    finally:
        stop_workers(first, second)

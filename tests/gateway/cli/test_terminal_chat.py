"""`switchboard chat` in a terminal: in process, and through a running gateway."""

from __future__ import annotations

import os
import subprocess
import sys


def _chat(settings, fake_openai, *args, public_url=None):
    env = {**os.environ, "SWITCHBOARD_REDIS_URL": settings.redis_url, "SWITCHBOARD_AGENT_ID": settings.agent_id,
           "SWITCHBOARD_DATA_DIR": str(settings.data_dir), "SWITCHBOARD_EMBEDDINGS": "none",
           "SWITCHBOARD_LLM_BASE_URL": fake_openai.url, "SWITCHBOARD_LLM_API_KEY": "sk-test",
           "SWITCHBOARD_PUBLIC_URL": public_url or "http://127.0.0.1:9", "SWITCHBOARD_LOG_LEVEL": "WARNING"}
    return subprocess.run([sys.executable, "-m", "gateway", "chat", *args], input="hello there\n\nsecond\n",
                          env=env, capture_output=True, text=True, timeout=120)


def test_in_process_chat_streams_replies_to_the_terminal(settings, fake_openai):
    done = _chat(settings, fake_openai)
    assert done.returncode == 0, done.stderr
    assert "agent> echo: hello there" in done.stdout and "agent> echo: second" in done.stdout
    assert len(fake_openai.chat_requests()) == 2  # the blank line was not sent


def test_chat_goes_through_a_running_gateway(gateway, settings, fake_openai):
    done = _chat(settings, fake_openai, public_url=gateway.url)
    assert done.returncode == 0, done.stderr
    assert f"connected to {gateway.url}" in done.stdout
    assert "agent> echo: second" in done.stdout

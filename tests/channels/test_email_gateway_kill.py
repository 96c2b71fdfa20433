"""A gateway killed (SIGKILL) while it answers a mail, and started again, answers that mail exactly once.

The mail was in the inbox before its UID was marked taken, so the next gateway neither loses it nor
reads it from the mailbox as new: it takes the queued delivery over, resumes the turn, and sends one
reply in the thread.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import httpx

from tests.channels.conftest import wait_until
from tests.channels.connections_support import ADMIN, SECRET_KEY
from tests.channels.mail_support import credentials, mail
from tests.fakes.live_server import free_port
from tests.workers import start_gateway, stop_workers


def _serve(settings, data_dir) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = {
        "SWITCHBOARD_REDIS_URL": settings.redis_url, "SWITCHBOARD_AGENT_ID": settings.agent_id,
        "SWITCHBOARD_DATA_DIR": str(data_dir), "SWITCHBOARD_QDRANT_URL": ":memory:",
        "SWITCHBOARD_EMBEDDINGS": "none", "SWITCHBOARD_LLM_BASE_URL": settings.llm_base_url,
        "SWITCHBOARD_LLM_API_KEY": "sk-test", "SWITCHBOARD_LLM_MAX_RETRIES": "0", "SWITCHBOARD_LLM_TIMEOUT_S": "120",
        "SWITCHBOARD_ADMIN_TOKEN": "admin-secret", "SWITCHBOARD_SECRET_KEY": SECRET_KEY,
        "SWITCHBOARD_EMAIL_POLL_S": "1", "SWITCHBOARD_INBOX_RECLAIM_S": "1",
        # the killed gateway's turn lock is free once its lease runs out: the next gateway waits that long
        "SWITCHBOARD_TURN_LOCK_LEASE_S": "2", "SWITCHBOARD_TURN_DRAIN_TIMEOUT_S": "2",
        "SWITCHBOARD_LOG_LEVEL": "WARNING",
    }
    return start_gateway(env, port), port


def test_a_gateway_killed_while_answering_a_mail_answers_it_once_after_a_restart(settings, mailbox, smtp,
                                                                                  fake_openai, tmp_path):
    fake_openai.script_reply("never sent", delay_s=60)
    fake_openai.script_reply("answered after the restart")
    first = second = None
    try:
        first, port = _serve(settings, tmp_path / "g1")
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            added = client.post("/api/connections", headers=ADMIN, json={
                "kind": "email", "name": "Support", "credentials": credentials(mailbox, smtp)})
            assert added.status_code == 201, added.text
        question = mail("Can I return the bike within 30 days?")
        mailbox.deliver(question)
        wait_until(lambda: len(fake_openai.chat_requests()) == 1, 30, "the first gateway to call the LLM")
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)

        second, _ = _serve(settings, tmp_path / "g2")
        [reply] = wait_until(lambda: smtp.messages, 60, "the reply from the restarted gateway")
        time.sleep(3)  # more mailbox looks and inbox reclaims: nothing is sent again
        assert len(smtp.messages) == 1
        assert reply["In-Reply-To"] == question["Message-ID"]
        assert "answered after the restart" in reply.get_content()
        assert len(fake_openai.chat_requests()) == 2  # the killed turn's call, and the one that answered
    finally:
        stop_workers(first, second)

"""A web-chat turn cut by a crash is answered after all, once; message ids belong to their session;
a dead process's lease does not hold the conversation up."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import httpx

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer, free_port
from tests.workers import start_gateway


def _serve(settings, fake_openai, port: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "SWITCHBOARD_REDIS_URL": settings.redis_url,
        "SWITCHBOARD_AGENT_ID": settings.agent_id,
        "SWITCHBOARD_DATA_DIR": str(settings.data_dir),
        "SWITCHBOARD_QDRANT_URL": ":memory:",
        "SWITCHBOARD_EMBEDDINGS": "none",
        "SWITCHBOARD_LLM_BASE_URL": fake_openai.url,
        "SWITCHBOARD_LLM_API_KEY": "sk-test",
        "SWITCHBOARD_LLM_MAX_RETRIES": "0",
        "SWITCHBOARD_TURN_LOCK_LEASE_S": "1",
    }
    return start_gateway(env, port)


def _post(url, session, text, cmid, timeout=60):
    return httpx.post(f"{url}/api/chat/sessions/{session['session_id']}/messages",
                      json={"text": text, "client_message_id": cmid},
                      headers={"Authorization": f"Bearer {session['token']}"}, timeout=timeout)


def _fire(url, session, text, cmid):
    """Send in the background; the process answering may die under it."""
    def send():
        try:
            _post(url, session, text, cmid)
        except httpx.HTTPError:
            pass

    threading.Thread(target=send, daemon=True).start()


def _transcript(url, session):
    return [(m["role"], m["text"]) for m in httpx.get(
        f"{url}/api/chat/sessions/{session['session_id']}/messages",
        headers={"Authorization": f"Bearer {session['token']}"}).json()["messages"]]


def test_turns_cut_by_a_crash_are_answered_once_after_a_restart(settings, fake_openai):
    port = free_port()
    proc = _serve(settings, fake_openai, port)
    url = f"http://127.0.0.1:{port}"
    try:
        sessions = [httpx.post(f"{url}/api/chat/sessions").json() for _ in range(4)]
        fake_openai.default_delay_s = 60  # the model is slow: every turn is mid-way when the process dies
        for i, session in enumerate(sessions):
            _fire(url, session, f"question {i}", f"c{i}")
        deadline = time.monotonic() + 20
        while len(fake_openai.chat_requests()) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(fake_openai.chat_requests()) == 4
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    fake_openai.default_delay_s = 0

    restarted = settings.model_copy(update={"turn_lock_lease_s": 1.0})
    with LiveServer(create_app(restarted)) as server:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if all(len(_transcript(server.url, s)) == 2 for s in sessions):
                break
            time.sleep(0.2)
        for i, session in enumerate(sessions):
            assert _transcript(server.url, session) == [("user", f"question {i}"), ("agent", f"echo: question {i}")]
        # The resend is told the truth: answered, and no second reply.
        again = _post(server.url, sessions[0], "question 0", "c0")
        assert again.status_code == 409 and "answered" in again.json()["message"]
        # The dead process's lease holds nothing up.
        t0 = time.monotonic()
        after = _post(server.url, sessions[0], "and now?", "c-next")
        assert after.json()["reply"]["text"] == "echo: and now?"
        assert time.monotonic() - t0 < 5
        assert len(_transcript(server.url, sessions[0])) == 4


def test_a_resend_of_a_cut_turn_is_answered_by_the_resend(settings, fake_openai):
    port = free_port()
    proc = _serve(settings, fake_openai, port)
    url = f"http://127.0.0.1:{port}"
    try:
        session = httpx.post(f"{url}/api/chat/sessions").json()
        fake_openai.default_delay_s = 60
        _fire(url, session, "cut me", "c1")
        deadline = time.monotonic() + 20
        while not fake_openai.chat_requests() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fake_openai.chat_requests()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    fake_openai.default_delay_s = 0
    # A gateway whose own sweep is slow (a long lease): the user's resend gets there first.
    with LiveServer(create_app(settings.model_copy(update={"turn_lock_lease_s": 30.0}))) as server:
        time.sleep(1.2)  # the dead process's lease (1 s) has run out
        resent = _post(server.url, session, "cut me", "c1")
        assert resent.status_code == 200, resent.text
        assert resent.json()["reply"]["text"] == "echo: cut me"
        assert _transcript(server.url, session) == [("user", "cut me"), ("agent", "echo: cut me")]


def test_client_message_ids_belong_to_their_session(gateway):
    a, b = (httpx.post(f"{gateway.url}/api/chat/sessions").json() for _ in range(2))
    assert _post(gateway.url, a, "from a", "msg-1").json()["reply"]["text"] == "echo: from a"
    from_b = _post(gateway.url, b, "from b", "msg-1")
    assert from_b.status_code == 200, from_b.text
    assert from_b.json()["reply"]["text"] == "echo: from b"
    assert _post(gateway.url, a, "from a", "msg-1").status_code == 409

"""Every configured secret set to a marker of its own; real flows run (web chat, an LLM error that
echoes the key, admin calls with a wrong token, vendor webhooks and a feed with bad signatures, data
injection whose URL carries a key, the agent API with a key); then no marker may appear in the captured
logs, the values stored in Redis (turn traces included), any answer body or /metrics."""

from __future__ import annotations

import json
import logging
import traceback

import httpx
import pytest
from pydantic import SecretStr

from gateway.core.logs import quiet_libraries
from gateway.jobs.registry import run_job
from gateway.live.context import FETCH_DATA_JOB
from gateway.live.data_injection import DataInjectionFailed
from tests.channels import vendors
from tests.fakes import slack_api, telegram_api, twilio_api
from tests.fakes.live_server import LiveServer
from tests.fakes.website import Website

MARKERS = {
    "llm_api_key": "sk-MARKER-llm-1f2e3d",
    "admin_token": "MARKER-admin-token-9a8b",
    "admin_password": "MARKER-admin-password-77",
    "reranker_api_key": "MARKER-rerank-key-5c5c",
    "feeds_secret": "MARKER-feeds-secret-4d4d",
    "metrics_token": "MARKER-metrics-token-3e3e",
}
FEED_MARKER = "MARKER-stock-feed-secret-2f2f"
DATA_KEY = "MARKER-data-source-key-6a6a"
VENDOR_SECRETS = [telegram_api.TOKEN, vendors.TELEGRAM_SECRET, slack_api.TOKEN, vendors.SLACK_SECRET,
                  twilio_api.AUTH_TOKEN]


@pytest.fixture
def data_site():
    website = Website()
    website.add("/feed", "down", statuses=[500])
    with LiveServer(website.app()) as server:
        website.url = server.url
        yield website


@pytest.fixture
def channel_overrides(data_site) -> dict:
    return {
        **{name: SecretStr(value) for name, value in MARKERS.items()},
        "admin_user": "root",
        "feed_secrets": {"stock": SecretStr(FEED_MARKER)},
        "outbound_allow_hosts": "127.0.0.1",
    }


def test_no_secret_leaves_through_logs_storage_traces_errors_or_metrics(
    live, client, stored, fake_openai, data_site, caplog,
):
    caplog.set_level(logging.DEBUG)
    quiet_libraries(logging.DEBUG)  # as `switchboard serve` configures them, even at DEBUG
    admin = {"Authorization": f"Bearer {MARKERS['admin_token']}"}
    bodies: list[str] = []

    def keep(response: httpx.Response) -> httpx.Response:
        bodies.append(response.text)
        return response

    # web chat: a turn, then an LLM error whose body echoes the key (some providers do)
    session = keep(client.post("/api/chat/sessions", json={})).json()
    chat = {"Authorization": f"Bearer {session['token']}"}
    fake_openai.script_reply("Hello from the agent.")
    assert "Hello" in keep(client.post(f"/api/chat/sessions/{session['session_id']}/messages",
                                       json={"text": "hi"}, headers=chat)).text
    fake_openai.script_raw(json.dumps({"error": {"message": f"Incorrect API key provided: {MARKERS['llm_api_key']}",
                                                 "type": "invalid_request_error"}}), status=401)
    keep(client.post(f"/api/chat/sessions/{session['session_id']}/messages", json={"text": "again"}, headers=chat))

    # admin calls: a wrong token, then the right one
    assert keep(client.get("/api/attributes", headers={"Authorization": "Bearer wrong"})).status_code == 401
    assert keep(client.get("/api/attributes", headers=admin)).status_code == 200

    # webhooks with bad signatures
    update = vendors.telegram_update(vendors.telegram_message("hello"))
    assert keep(vendors.post_telegram(client, update, secret="wrong")).status_code in (401, 403)
    slack = vendors.slack_envelope(vendors.slack_event("hello"))
    assert keep(vendors.post_slack(client, slack, secret="wrong")).status_code in (401, 403)
    sms = vendors.sms_params("hello")
    assert keep(vendors.post_twilio(client, "/channels/twilio/sms", sms, token="wrong")).status_code in (401, 403)
    feed = keep(client.post("/webhooks/feeds/stock", json={"text": "x"},
                            headers={"X-Switchboard-Timestamp": "1", "X-Switchboard-Signature": "sha256=00"}))
    assert feed.status_code in (401, 403)

    # data injection to a source whose URL carries a key; the source fails
    for name, value in [("project_attributes_setting_data_injection_url", f"{data_site.url}/feed?key={DATA_KEY}"),
                        ("project_attributes_setting_data_injection_is_enabled", True)]:
        assert client.put(f"/api/attributes/{name}", json={"value": value}, headers=admin).status_code == 200
    with pytest.raises(DataInjectionFailed) as failed:
        run_job(live.services.settings.agent_id, FETCH_DATA_JOB, "s1")
    job_error = "".join(traceback.format_exception(failed.value))  # what RQ logs for a failed job
    assert data_site.paths() == ["/feed"]

    # the agent API with a key
    agent = keep(client.post("/v1/agents", headers=admin, json={
        "name": "helper", "displayName": "Helper", "description": "answers", "config": {}})).json()
    # (the key is in this answer, once, by design)
    key = client.post("/api/keys", headers=admin, json={"name": "crm", "agents": [agent["id"]]}).json()["key"]
    fake_openai.script_reply("An answer for the API.")
    invoked = keep(client.post(f"/v1/agents/{agent['id']}/versions/latest/invoke",
                               headers={"Authorization": f"Bearer {key}"}, json={"messages": [
                                   {"role": "user", "content": "hello"}]}))
    assert invoked.status_code == 200, invoked.text
    keep(client.post(f"/v1/agents/{agent['id']}/versions/latest/invoke",
                     headers={"Authorization": f"Bearer {key}x"}, json={"messages": []}))

    metrics = client.get("/metrics", headers={"Authorization": f"Bearer {MARKERS['metrics_token']}"}).text
    logs = "\n".join(f"{r.getMessage()} {r.exc_text or ''} {r.args!r}" for r in caplog.records)
    assert "data injection failed" in logs and "HTTP 500" in job_error  # the capture works
    places = {"logs": logs, "redis": _everything_in(stored), "bodies": "\n".join(bodies), "metrics": metrics,
              "job error": job_error}
    secrets = [*MARKERS.values(), FEED_MARKER, DATA_KEY, key, key.removeprefix("sbk_"), *VENDOR_SECRETS]
    leaks = {(where, secret) for where, text in places.items() for secret in secrets if secret in text}
    assert leaks == {("redis", DATA_KEY)}  # only where the operator put it: the data source's URL attribute
    assert len(places["redis"]) > 1000 and "Hello from the agent." in places["redis"]  # traces and messages read


def _everything_in(stored) -> str:
    """Every value of every key of the agent, whatever its type."""
    r, out = stored.redis, []
    for key in stored.keys():
        kind = r.type(key).decode()
        if kind == "string":
            out.append(r.get(key))
        elif kind == "hash":
            out += [*r.hkeys(key), *r.hvals(key)]
        elif kind == "list":
            out += r.lrange(key, 0, -1)
        elif kind in ("set",):
            out += list(r.smembers(key))
        elif kind == "zset":
            out += r.zrange(key, 0, -1)
        elif kind == "stream":
            out += [repr(entry).encode() for entry in r.xrange(key)]
    return "\n".join(v.decode(errors="replace") if isinstance(v, bytes) else str(v) for v in out)

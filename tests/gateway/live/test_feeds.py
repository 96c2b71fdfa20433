"""Inbound data feeds: signed, fresh, bounded JSON becomes a prompt section (or nothing is stored)."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from tests.gateway.live.conftest import feed_body, signed_headers


@pytest.fixture
def post(live_gateway, clock):
    def send(feed: str, body: bytes, headers: dict | None = None) -> httpx.Response:
        headers = headers if headers is not None else signed_headers(body, at=clock.now().timestamp())
        return httpx.post(f"{live_gateway.url}/webhooks/feeds/{feed}", content=body, headers=headers)
    return send


def _system(admin, persona_id=None) -> str:
    body = {"text": "hi"} if persona_id is None else {"text": "hi", "persona_id": persona_id}
    return admin.post("/api/prompt/preview", json=body).json()["messages"][0]["content"]


def test_signed_feed_becomes_a_project_section_until_it_expires(post, admin, clock):
    resp = post("specials", feed_body(text="Lobster risotto tonight", expires_in=600))
    assert resp.status_code == 200, resp.text
    assert resp.json()["scope"] == "project" and resp.json()["expires_at"].startswith("2026-02-24T09:10:00")
    assert '<specials updated="just now">\nLobster risotto tonight\n</specials>' in _system(admin)
    clock.advance(timedelta(minutes=5))
    assert '<specials updated="5 minutes ago">' in _system(admin)
    clock.advance(timedelta(minutes=6))
    assert "specials" not in _system(admin)


def test_feed_for_one_persona_and_data_payloads(post, admin, live_gateway):
    pid = httpx.post(f"{live_gateway.url}/api/chat/sessions").json()["persona_id"]
    resp = post("order_status", feed_body(data={"order": 1042, "status": "shipped"}, persona_id=pid))
    assert resp.json()["scope"] == "persona"
    assert '<order_status updated="just now">\n{\n  "order": 1042,\n  "status": "shipped"\n}\n</order_status>' \
        in _system(admin, pid)
    assert "order_status" not in _system(admin)
    # A later push replaces the section.
    post("order_status", feed_body(text="delivered", persona_id=pid))
    assert "<order_status updated=\"just now\">\ndelivered\n</order_status>" in _system(admin, pid)


@pytest.mark.parametrize("case", ["bad_signature", "wrong_secret", "missing", "stale", "future", "tampered"])
def test_bad_or_stale_signatures_are_401_and_store_nothing(post, admin, clock, case):
    body = feed_body(text="should not be stored")
    now = clock.now().timestamp()
    headers = {
        "bad_signature": {**signed_headers(body, at=now), "X-Switchboard-Signature": "sha256=" + "0" * 64},
        "wrong_secret": signed_headers(body, secret="other", at=now),
        "missing": {"Content-Type": "application/json"},
        "stale": signed_headers(body, at=now - 301),
        "future": signed_headers(body, at=now + 301),
        "tampered": signed_headers(feed_body(text="something else"), at=now),
    }[case]
    resp = post("news", body, headers)
    assert (resp.status_code, resp.json()["error"]) == (401, "unauthorized")
    assert "should not be stored" not in _system(admin)


def test_a_replayed_request_is_refused(post, admin, clock):
    body = feed_body(text="once")
    headers = signed_headers(body, at=clock.now().timestamp())
    assert post("news", body, headers).status_code == 200
    again = post("news", body, headers)
    assert again.status_code == 401 and "replayed" in again.json()["message"]


def test_oversized_non_json_and_invalid_bodies(post, admin, live_gateway):
    limit = live_gateway.services.settings.feeds_max_bytes
    big = feed_body(text="x" * limit)
    assert (post("news", big).status_code, post("news", big).json()["error"]) == (413, "payload_too_large")
    resp = post("news", b"not json at all")
    assert (resp.status_code, resp.json()["error"]) == (400, "bad_request")
    both = post("news", feed_body(text="a", data={"b": 1}))
    assert both.status_code == 422 and "exactly one" in both.json()["message"]
    assert post("news", feed_body(text="a", expires_in=-5)).status_code == 422
    assert post("news", feed_body(text="a", persona_id="nobody")).status_code == 404
    bad_name = post("bad%20name", feed_body(text="a"))
    assert bad_name.status_code == 422
    assert "<news" not in _system(admin)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested deeper than 64 levels"),
        (b'{"data": {"n": ' + b"9" * 5000 + b"}}", "body.data.n: integer of 5000 digits"),
        (b'{"text": "tonight \\ud800"}', "body.text: invalid Unicode (lone surrogate)"),
        (b'{"text": "caf\xe9"}', "not valid UTF-8"),
    ],
)
def test_signed_hostile_json_is_400_and_stores_nothing(post, admin, live_gateway, body, fragment):
    resp = post("news", body)
    assert (resp.status_code, resp.json()["error"]) == (400, "bad_request"), resp.text
    assert fragment in resp.json()["message"]
    assert "<news" not in _system(admin)


def test_per_feed_secret_overrides_the_shared_one(live_settings, clock):
    from pydantic import SecretStr

    from gateway.http.app import create_app
    from gateway.services import Services
    from tests.fakes.live_server import LiveServer

    settings = live_settings.model_copy(update={"feed_secrets": {"pos": SecretStr("pos-only")}})
    with LiveServer(create_app(settings, services=Services.build(settings, clock=clock))) as server:
        body = feed_body(text="till 3 open")
        url = f"{server.url}/webhooks/feeds/pos"
        shared = httpx.post(url, content=body, headers=signed_headers(body, at=clock.now().timestamp()))
        assert shared.status_code == 401
        own = httpx.post(url, content=body, headers=signed_headers(body, secret="pos-only", at=clock.now().timestamp()))
        assert own.status_code == 200

"""Slack specifics: mentions answered in their thread, DMs, bots and edits ignored, url_verification."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
import time

import pytest

from gateway.core.models import Role
from tests.channels import vendors
from tests.channels.conftest import metric, settle
from tests.fakes import slack_api


def test_url_verification_answers_the_challenge(client, fake_slack):
    challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    resp = vendors.post_slack(client, {"token": "t", "challenge": challenge, "type": "url_verification"})
    assert resp.status_code == 200
    assert resp.json() == {"challenge": challenge}


def test_app_mention_is_answered_in_its_thread_with_mrkdwn(client, live, fake_slack, fake_openai, stored):
    fake_openai.script_reply("**Yes** — see [pricing](https://example.com/pricing) & more")
    event = vendors.slack_event(f"<@{slack_api.BOT_USER_ID}> do you ship &amp; deliver?", ts="1710000000.000100")
    assert vendors.post_slack(client, vendors.slack_envelope(event)).status_code == 200
    settle(live)
    [posted] = fake_slack.posted()
    assert posted["channel"] == "C0GENERAL" and posted["thread_ts"] == "1710000000.000100"
    assert posted["text"] == "*Yes* — see <https://example.com/pricing|pricing> &amp; more"
    [user] = [m for m in stored.messages("slack:T0TEST001/U0ADA0001") if m.role == Role.USER]
    assert user.text == "do you ship & deliver?"


def test_mention_inside_a_thread_replies_in_that_thread_and_keeps_one_conversation(client, live, fake_slack, stored):
    for i, text in enumerate(("first", "second")):
        event = vendors.slack_event(f"<@{slack_api.BOT_USER_ID}> {text}", ts=f"171000000{i}.000200",
                                    thread_ts="1700000000.000001")
        vendors.post_slack(client, vendors.slack_envelope(event))
        settle(live)
    assert {p["thread_ts"] for p in fake_slack.posted()} == {"1700000000.000001"}
    users = [m for m in stored.messages("slack:T0TEST001/U0ADA0001") if m.role == Role.USER]
    assert len({m.conversation_id for m in users}) == 1


def test_direct_message_is_answered_in_the_dm(client, live, fake_slack):
    event = vendors.slack_event("hello bot", kind="message", channel="D0DM00001")
    vendors.post_slack(client, vendors.slack_envelope(event))
    settle(live)
    [posted] = fake_slack.posted()
    assert posted["channel"] == "D0DM00001" and "thread_ts" not in posted and posted["text"] == "echo: hello bot"


def test_bot_messages_edits_and_channel_chatter_are_ignored(client, live, fake_slack, fake_openai):
    bot = vendors.slack_event("I am a bot", kind="message", channel="D0DM00001", bot_id="B0OTHER",
                              subtype="bot_message")
    ours = vendors.slack_event("our own reply", kind="message", channel="D0DM00001", user=slack_api.BOT_USER_ID)
    edit = vendors.slack_event("", kind="message", channel="D0DM00001", subtype="message_changed",
                               message={"type": "message", "user": "U0ADA0001", "text": "edited", "ts": "1.2"})
    chatter = vendors.slack_event("no mention here", kind="message", channel="C0GENERAL", channel_type="channel")
    for event in (bot, ours, edit, chatter):
        assert vendors.post_slack(client, vendors.slack_envelope(event)).status_code == 200
    time.sleep(0.3)
    settle(live)
    assert fake_slack.posted() == [] and fake_openai.chat_requests() == []


def test_mention_and_message_events_for_one_message_give_one_reply(client, live, fake_slack):
    ts = "1710000123.000100"
    mention = vendors.slack_event(f"<@{slack_api.BOT_USER_ID}> hi", ts=ts, channel="D0DM00002")
    message = vendors.slack_event(f"<@{slack_api.BOT_USER_ID}> hi", kind="message", ts=ts, channel="D0DM00002")
    vendors.post_slack(client, vendors.slack_envelope(mention))
    vendors.post_slack(client, vendors.slack_envelope(message))
    settle(live)
    assert [p["text"] for p in fake_slack.posted()] == ["echo: hi"]


def test_stale_timestamp_is_refused(client, stored):
    event = vendors.slack_event(f"<@{slack_api.BOT_USER_ID}> hi")
    resp = vendors.post_slack(client, vendors.slack_envelope(event), timestamp=int(time.time()) - 600)
    assert resp.status_code == 401 and stored.keys("msg:*") == []


def test_ack_comes_before_the_slow_reply(client, live, fake_slack, fake_openai):
    fake_openai.script_reply("slow answer", delay_s=1.5)
    started = time.monotonic()
    resp = vendors.post_slack(client, vendors.slack_envelope(vendors.slack_event("take your time", kind="message",
                                                                                  channel="D0DM00003")))
    acked = time.monotonic() - started
    assert resp.status_code == 200 and acked < 1.0
    assert fake_slack.posted() == []
    settle(live)
    assert [p["text"] for p in fake_slack.posted()] == ["slow answer"]


# -- hostile requests: 4xx with the JSON error body, counted, nothing queued or stored ----------------------
SIGNATURE_REJECTIONS = 'switchboard_rejected_requests_total{channel="slack",reason="signature"}'


def _signed(body: bytes, *, timestamp: int | None = None) -> dict[str, str]:
    ts = str(timestamp if timestamp is not None else int(time.time()))
    # the SDK signs text; sign the raw bytes exactly as Slack does (HMAC over "v0:ts:" + body)
    digest = hmac.new(vendors.SLACK_SECRET.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}


def _nothing_queued(stored) -> None:
    assert stored.redis.xlen(stored.services.store.key("inbox")) == 0
    assert stored.keys("dedup:*") == [] and stored.keys("msg:*") == []


@pytest.mark.parametrize(
    "headers",
    [
        {},  # no Slack headers at all: no credentials needed to reach the verifier
        {"X-Slack-Signature": "v0=" + "0" * 64},
        {"X-Slack-Request-Timestamp": "", "X-Slack-Signature": "v0=" + "0" * 64},
        {"X-Slack-Request-Timestamp": "yesterday", "X-Slack-Signature": "v0=" + "0" * 64},
    ],
)
def test_missing_or_garbled_signature_headers_are_401_counted_and_logged_without_traceback(
    client, stored, caplog, headers
):
    before = metric(client, SIGNATURE_REJECTIONS)
    body = json.dumps(vendors.slack_envelope(vendors.slack_event(f"<@{slack_api.BOT_USER_ID}> hi")))
    with caplog.at_level(logging.INFO):
        resp = client.post("/channels/slack/events", content=body, headers={"Content-Type": "application/json",
                                                                            **headers})
    assert (resp.status_code, resp.json()["error"]) == (401, "unauthorized")
    assert metric(client, SIGNATURE_REJECTIONS) == before + 1
    assert [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []
    _nothing_queued(stored)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b'{"type": "event_callback", "event": ', "not valid JSON"),
        (b'{"type": "event_callback", "event": ' + b"[" * 100_000, "nested deeper"),
        (b'{"type": "event_callback", "event_id": "Ev1", "event": {"type": "message", "text": "\xff"}}',
         "not valid UTF-8"),
        (b'{"type": "event_callback", "event_id": "Ev1", "event": {"type": "app_mention", "text": "\\ud800"}}',
         "body.event.text: invalid Unicode (lone surrogate)"),
        (b"payload=" + b"%5B" * 5000, "body.payload: nested deeper"),
    ],
)
def test_signed_but_malformed_bodies_are_400_not_500(client, stored, fake_slack, body, fragment):
    headers = _signed(body)
    if body.startswith(b"payload="):
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    resp = client.post("/channels/slack/events", content=body, headers=headers)
    assert (resp.status_code, resp.json()["error"]) == (400, "bad_request"), resp.text
    assert fragment in resp.json()["message"]
    assert metric(client, 'switchboard_rejected_requests_total{channel="slack",reason="validation"}') == 1
    time.sleep(0.2)
    _nothing_queued(stored)
    assert fake_slack.posted() == []


def test_an_unsigned_50mb_webhook_is_413_before_it_is_read(live):
    host, port = live.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=3) as sock:
        sock.sendall(f"POST /channels/slack/events HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {50 * 1024 * 1024}\r\n\r\n{{\"type\": ".encode())
        answer = sock.recv(65536)
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.split()[1] == b"413"
    assert json.loads(rest.split(b"\r\n\r\n", 1)[1])["error"] == "payload_too_large"

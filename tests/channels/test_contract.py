"""The channel contract, run against every messaging channel through its real webhook and vendor client.

Each case asserts what a user or operator would notice: what the fake vendor API received, what
the gateway stored in Redis, what the metrics say.
"""

from __future__ import annotations

import html
import re
import time
import xml.etree.ElementTree as ET

import httpx
import pytest
from pydantic import SecretStr

from gateway.core.models import DeliveryStatus, Role
from tests.channels import vendors
from tests.channels.conftest import metric, settle, wait_until
from tests.channels.connections_support import SECRET_KEY, add, webhook_path
from tests.fakes import twilio_api
from tests.fakes.recording import Recorder


class Harness:
    """How the contract talks to one messaging channel: deliver a user message, read what the user got.

    One subclass per channel; the cases below never ask which channel they run on."""

    name: str
    limit: int  # the longest message the vendor accepts
    identity: str  # the persona identity its users get
    method: str  # the vendor API call that sends a reply
    sent_status: int = 200  # what that call answers on success
    refused_as: str = "signature"  # the reason a refused, unverified request is counted under
    repeat_status: int = 200  # what a repeated delivery is answered (vendors must not retry again)

    def __init__(self, fake) -> None:
        self.fake = fake

    def open(self, client: httpx.Client) -> None:
        """What a user does before their first message (nothing, for a vendor channel)."""

    @property
    def recorder(self) -> Recorder:
        return self.fake.recorder

    def deliver(self, client: httpx.Client, text: str, *, key: str, signed: bool = True,
                retry: bool = False) -> httpx.Response:
        raise NotImplementedError

    def sent(self) -> list[str]:
        """What the vendor API was asked to send, as sent."""
        return self.fake.sent_texts()

    def replies(self) -> list[str]:
        """What the user reads."""
        return self.sent()

    def attempts(self) -> list:
        return self.recorder.received(self.method, ok_only=False)


class TelegramHarness(Harness):
    name, limit, identity, method = "telegram", 4096, f"telegram:{vendors.USER_ID}", "sendMessage"

    def deliver(self, client, text, *, key, signed=True, retry=False):
        update = vendors.telegram_update(vendors.telegram_message(text), update_id=int(key))
        return vendors.post_telegram(client, update, vendors.TELEGRAM_SECRET if signed else "wrong-secret")

    def replies(self):
        return [html.unescape(t) for t in self.sent()]  # HTML parse mode escapes &, <, >


class SlackHarness(Harness):
    name, limit, identity, method = "slack", 40_000, "slack:T0TEST001/U0ADA0001", "chat.postMessage"

    def deliver(self, client, text, *, key, signed=True, retry=False):
        event = vendors.slack_event(text, kind="message", channel="D0DIRECT01", ts=f"{key}.000100")
        envelope = vendors.slack_envelope(event, event_id=f"Ev{key}")
        secret = vendors.SLACK_SECRET if signed else "not-the-signing-secret"
        return vendors.post_slack(client, envelope, secret=secret, retry_num=1 if retry else None)

    def replies(self):
        return [html.unescape(t) for t in self.sent()]  # mrkdwn escapes &, <, > as entities


class TwilioSmsHarness(Harness):
    name, limit, identity, method = "twilio_sms", 1600, f"phone:{vendors.CALLER}", "Messages"
    sent_status = 201

    def deliver(self, client, text, *, key, signed=True, retry=False):
        params = vendors.sms_params(text, sid=f"SM{key}")
        return vendors.post_twilio(client, "/channels/twilio/sms", params,
                                   token=self.fake.auth_token if signed else "wrong-token")


class TwilioVoiceHarness(Harness):
    """The reply is spoken in the TwiML that answers the speech webhook; a retry of a webhook is
    answered again with the same turn's reply, and the caller hears it once."""

    name, limit, identity, method = "twilio_voice", 4000, f"phone:{vendors.CALLER}", "-"

    def __init__(self, fake) -> None:
        super().__init__(fake)
        self.heard: dict[str, str] = {}

    path, token = "/channels/twilio/voice", twilio_api.AUTH_TOKEN  # the environment's number

    def deliver(self, client, text, *, key, signed=True, retry=False):
        params = vendors.call_params(f"CA{key}", SpeechResult=text, Confidence="0.9")
        resp = vendors.post_twilio(client, f"{self.path}/turn?n=1", params,
                                   token=self.token if signed else "wrong-token")
        if resp.status_code == 200:
            said = ET.fromstring(resp.text).find("Gather/Say")
            if said is not None:
                self.heard[key] = said.text
        return resp

    def replies(self):
        return list(self.heard.values())


class TwilioVoiceConnectionHarness(TwilioVoiceHarness):
    """A voice number added through /api/connections: its own webhook, signed by its own account."""

    case, token = "twilio_voice_connection", "contract-voice-connection-token"

    def open(self, client):
        sid = "AC" + "4" * 32
        self.fake.add_account(sid, self.token)
        line = add(client, kind="twilio_voice", name="Contract line", credentials={
            "account_sid": sid, "auth_token": self.token, "phone_number": "+15550004444"})
        self.path = webhook_path(line)
        self.identity = f"phone:{vendors.CALLER}@{line['id']}"


class WebChatHarness(Harness):
    """The reply is the HTTP response; a resent message id is answered 409 with no second reply."""

    name, limit, method = "webchat", 100_000, "-"
    refused_as, repeat_status = "token", 409

    def __init__(self, fake) -> None:
        super().__init__(fake)
        self.answers: list[str] = []
        self.session: dict = {}

    def open(self, client):
        self.session = client.post("/api/chat/sessions").json()
        self.identity = f"web:{self.session['session_id']}"

    def deliver(self, client, text, *, key, signed=True, retry=False):
        token = self.session["token"] if signed else "not-the-token"
        resp = client.post(f"/api/chat/sessions/{self.session['session_id']}/messages",
                           json={"text": text, "client_message_id": key}, headers={"Authorization": f"Bearer {token}"})
        if resp.status_code == 200:
            self.answers.append(resp.json()["reply"]["text"])
        return resp

    def replies(self):
        return self.answers


class MetaHarness(Harness):
    """A Meta connection (added through the API when the case starts), its deliveries signed as Meta signs."""

    token = "EAAG-contract-token-0123"
    account: str
    kind: str  # in Meta's word: whatsapp, page or instagram
    credentials: dict[str, str]
    method = "messages"

    def open(self, client):
        self.fake.add_account(self.account, self.token, self.kind, name="Shop", username="shop",
                              verified_name="Shop", display_phone_number="+1 555 0100")
        self.connection = add(client, kind=self.name, name=f"{self.name} contract", credentials={
            **self.credentials, "app_secret": vendors.META_APP_SECRET})
        self.identity = f"{self.identity}@{self.connection['id']}"

    def payload(self, text: str, key: str) -> dict:
        raise NotImplementedError

    def deliver(self, client, text, *, key, signed=True, retry=False):
        return vendors.post_meta(client, webhook_path(self.connection), self.payload(text, key),
                                 secret=vendors.META_APP_SECRET if signed else "not-the-app-secret")


class WhatsAppCloudHarness(MetaHarness):
    name, limit, identity, kind = "whatsapp_cloud", 4096, f"whatsapp:+{vendors.WA_CUSTOMER}", "whatsapp"
    account = vendors.WA_PHONE_NUMBER_ID
    credentials = {"access_token": MetaHarness.token, "phone_number_id": vendors.WA_PHONE_NUMBER_ID}

    def payload(self, text, key):
        return vendors.whatsapp_delivery(vendors.whatsapp_text(text, mid=f"wamid.{key}"))


class MessengerHarness(MetaHarness):
    name, limit, identity, kind = "messenger", 2000, f"messenger:{vendors.PSID}", "page"
    account = vendors.PAGE_ID
    credentials = {"page_access_token": MetaHarness.token, "page_id": vendors.PAGE_ID}

    def payload(self, text, key):
        return vendors.messaging_delivery(vendors.messaging_text(text, mid=f"m_{key}"))


class InstagramHarness(MetaHarness):
    name, limit, identity, kind = "instagram", 1000, f"instagram:{vendors.PSID}", "instagram"
    account = vendors.IG_USER_ID
    credentials = {"access_token": MetaHarness.token, "ig_user_id": vendors.IG_USER_ID}

    def payload(self, text, key):
        event = vendors.messaging_text(text, mid=f"m_{key}", recipient=vendors.IG_USER_ID)
        return vendors.messaging_delivery(event, obj="instagram", account=vendors.IG_USER_ID)


META = [WhatsAppCloudHarness, MessengerHarness, InstagramHarness]


class TeamsHarness(Harness):
    """A Teams connection (added through the API when the case starts); each activity carries a token signed
    as the Bot Connector signs it, or (unverified) one signed with another key."""

    name, limit, identity, method = "teams", 20_000, f"teams:{vendors.TEAMS_USER}", "reply"

    def open(self, client):
        self.fake.add_app(vendors.TEAMS_APP_ID, vendors.TEAMS_APP_PASSWORD)
        self.connection = add(client, kind="teams", name="Teams contract", credentials={
            "app_id": vendors.TEAMS_APP_ID, "app_password": vendors.TEAMS_APP_PASSWORD})
        self.identity = f"{self.identity}@{self.connection['id']}"

    def deliver(self, client, text, *, key, signed=True, retry=False):
        activity = vendors.teams_message(text, service_url=self.fake.service_url, activity_id=f"1732{key}")
        token = self.fake.activity_token(vendors.TEAMS_APP_ID, forged=not signed)
        return vendors.post_teams(client, webhook_path(self.connection), activity, token)


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY)}  # connections can be added


@pytest.fixture(params=[TelegramHarness, SlackHarness, TwilioSmsHarness, TwilioVoiceHarness,
                        TwilioVoiceConnectionHarness, WebChatHarness, *META, TeamsHarness],
                ids=lambda h: getattr(h, "case", h.name))
def any_channel(request, fake_telegram, fake_slack, fake_twilio, fake_meta, fake_teams, client) -> Harness:
    """Every channel (and connection kind), for the cases every channel must pass."""
    fakes = {"telegram": fake_telegram, "slack": fake_slack, "twilio_sms": fake_twilio,
             "twilio_voice": fake_twilio, "webchat": None, **{h.name: fake_meta for h in META}, "teams": fake_teams}
    harness = request.param(fakes[request.param.name])
    harness.open(client)
    return harness


@pytest.fixture(params=[TelegramHarness, SlackHarness, TwilioSmsHarness, *META, TeamsHarness], ids=lambda h: h.name)
def channel(request, fake_telegram, fake_slack, fake_twilio, fake_meta, fake_teams, client) -> Harness:
    fakes = {"telegram": fake_telegram, "slack": fake_slack, "twilio_sms": fake_twilio,
             **{h.name: fake_meta for h in META}, "teams": fake_teams}
    harness = request.param(fakes[request.param.name])
    harness.open(client)
    return harness


def _key() -> str:
    return str(vendors.next_id())


def test_an_unverified_request_is_refused_changes_nothing_and_is_counted(any_channel, client, stored, fake_openai):
    before = {kind: stored.keys(f"{kind}:*") for kind in ("msg", "dedup", "identity", "persona")}
    resp = any_channel.deliver(client, "hello there", key=_key(), signed=False)
    assert resp.status_code in (401, 403)
    assert resp.json()["error"] in ("unauthorized", "forbidden")
    time.sleep(0.2)
    assert {kind: stored.keys(f"{kind}:*") for kind in before} == before
    assert fake_openai.chat_requests() == []
    assert any_channel.replies() == []
    rejected = f'switchboard_rejected_requests_total{{channel="{any_channel.name}",reason="{any_channel.refused_as}"}}'
    assert metric(client, rejected) == 1


def test_a_repeated_delivery_gets_exactly_one_reply(any_channel, client, live, stored, fake_openai):
    key = _key()
    first = any_channel.deliver(client, "When do you open?", key=key)
    again = any_channel.deliver(client, "When do you open?", key=key, retry=True)
    assert first.status_code == 200 and again.status_code == any_channel.repeat_status
    settle(live)
    time.sleep(0.1)
    assert any_channel.replies() == ["echo: When do you open?"]
    assert len(fake_openai.chat_requests()) == 1
    assert [(m.role, m.text) for m in stored.messages(any_channel.identity)] == [
        (Role.USER, "When do you open?"), (Role.AGENT, "echo: When do you open?")]
    assert metric(client, f'switchboard_duplicate_messages_total{{channel="{any_channel.name}"}}') == 1


def _long_reply(limit: int) -> str:
    sentence = "Our <premium> plan & the basic plan differ in support hours, limits and price. "
    paragraphs, size, i = [], 0, 0
    while size < limit * 2.3:
        i += 1
        para = f"Section {i}: " + sentence * (3 + i % 5)
        paragraphs.append(para.strip())
        size += len(para)
    return "\n\n".join(paragraphs)


def _words(text: str) -> list[str]:
    return text.split()


def test_long_reply_is_split_within_the_limit_into_numbered_parts(channel, client, live, fake_openai):
    original = _long_reply(channel.limit)
    fake_openai.script_reply(original)
    channel.deliver(client, "Compare the plans", key=_key())
    settle(live, timeout=20)
    raw = channel.sent()
    assert len(raw) >= 3
    assert all(len(part) <= channel.limit for part in raw), [len(p) for p in raw]
    parts = channel.replies()
    n = len(parts)
    body = []
    for i, part in enumerate(parts, 1):
        assert part.startswith(f"({i}/{n}) "), part[:20]
        body.append(part[len(f"({i}/{n}) "):])
        assert re.search(r"[.:]\s*$|\d$", body[-1].rstrip()), "a part ends mid-sentence"
    assert _words(" ".join(body)) == _words(original)


def test_rate_limited_send_is_retried_after_retry_after_then_delivered(channel, client, live, stored):
    channel.recorder.fail(channel.method, 429, retry_after=1)
    channel.deliver(client, "hi", key=_key())
    settle(live)
    attempts = channel.attempts()
    assert [a.status for a in attempts] == [429, channel.sent_status]
    assert attempts[1].at - attempts[0].at >= 0.9
    assert channel.replies() == ["echo: hi"]
    agent = [m for m in stored.messages(channel.identity) if m.role == Role.AGENT]
    assert agent[0].delivery == DeliveryStatus.DELIVERED and agent[0].delivery_error is None


@pytest.mark.parametrize("channel_overrides",  # dead-lettered then; the key: Meta kinds are connections
                         [{"inbox_retry_window_s": 0.3, "secret_key": SecretStr(SECRET_KEY)}])
def test_send_failing_forever_is_recorded_as_failed_on_the_message_and_trace(channel, client, live, stored):
    channel.recorder.fail_always(channel.method, 500)
    channel.deliver(client, "hi", key=_key())
    settle(live)
    tries = live.services.settings.channel_send_tries
    assert len(channel.attempts()) >= 2 * tries and len(channel.attempts()) % tries == 0  # sent again, in full
    assert channel.replies() == []
    [letter] = client.get("/api/inbox", headers={"Authorization": "Bearer admin-secret"}).json()["dead_letters"]
    assert letter["error"].startswith("still failing after 0.3 s") and "ReplyNotSent" in letter["error"]
    agent = wait_until(lambda: [m for m in stored.messages(channel.identity) if m.role == Role.AGENT])[0]
    assert agent.delivery == DeliveryStatus.FAILED
    assert f"gave up after {live.services.settings.channel_send_tries} tries" in agent.delivery_error
    trace = stored.traces(agent)[0]
    assert trace.delivery_error == agent.delivery_error and trace.reply == "echo: hi"
    assert metric(client, f'switchboard_delivery_failures_total{{channel="{channel.name}"}}') == 1

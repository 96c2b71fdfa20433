"""A live gateway with every channel configured, each vendor API a local fake that records calls."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator

import httpx
import pytest
import redis
from pydantic import SecretStr

from gateway.core.models import Message, TurnTrace
from gateway.http.app import create_app
from gateway.services import Services
from tests.channels import vendors
from tests.channels.connections_support import SECRET_KEY
from tests.channels.mail_support import dovecot, mailbox, smtp  # noqa: F401 - fixtures: the email kind's peers
from tests.fakes import slack_api, telegram_api, twilio_api
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.live_server import LiveServer
from tests.fakes.meta_graph import FakeGraph
from tests.fakes.slack_api import FakeSlack
from tests.fakes.teams_api import FakeTeams
from tests.fakes.telegram_api import FakeTelegram
from tests.fakes.twilio_api import FakeTwilio
from tests.inspect import read_persona_messages


@pytest.fixture(scope="session")
def _fake_servers() -> Iterator[tuple[FakeTelegram, FakeSlack, FakeTwilio, FakeGraph, FakeTeams, FakeDiscord]]:
    fakes = (FakeTelegram(), FakeSlack(), FakeTwilio(), FakeGraph(), FakeTeams(), FakeDiscord())
    servers = [LiveServer(f.app()).start() for f in fakes]
    for fake, server in zip(fakes, servers, strict=True):
        fake.url = server.url
    yield fakes
    for server in servers:
        server.stop()


@pytest.fixture
def fake_telegram(_fake_servers) -> FakeTelegram:
    fake = _fake_servers[0]
    fake.recorder.reset()
    fake.updates.clear()
    fake.answer_sends_after_s = 0.0
    fake.bots.clear()
    fake.sent.clear()
    fake.files.clear()
    fake.served.clear()
    fake.unsized.clear()
    return fake


@pytest.fixture
def fake_slack(_fake_servers) -> FakeSlack:
    _fake_servers[1].recorder.reset()
    _fake_servers[1].sent_ts.clear()
    _fake_servers[1].files.clear()
    return _fake_servers[1]


@pytest.fixture
def fake_twilio(_fake_servers) -> FakeTwilio:
    fake = _fake_servers[2]
    fake.recorder.reset()
    fake.tokens.clear()
    fake.answer_creates_after_s = 0.0
    fake.accounts.clear()
    fake.outside_window.clear()
    fake.media.clear()
    return fake


@pytest.fixture
def fake_meta(_fake_servers) -> FakeGraph:
    fake = _fake_servers[3]
    fake.reset()
    return fake


@pytest.fixture
def fake_teams(_fake_servers) -> FakeTeams:
    fake = _fake_servers[4]
    fake.reset()
    return fake


@pytest.fixture
def fake_discord(_fake_servers) -> FakeDiscord:
    fake = _fake_servers[5]
    fake.reset()
    return fake


@pytest.fixture
def channel_overrides() -> dict:
    """Tests override settings by filling this dict before ``live`` starts the gateway."""
    return {}


@pytest.fixture
def channel_settings(settings, fake_telegram, fake_slack, fake_twilio, fake_meta, fake_teams, fake_discord,
                     channel_overrides):
    update = {
        "public_url": vendors.PUBLIC_URL,
        "telegram_bot_token": SecretStr(telegram_api.TOKEN),
        "telegram_webhook_secret": SecretStr(vendors.TELEGRAM_SECRET),
        "telegram_api_base": fake_telegram.url,
        "slack_bot_token": SecretStr(slack_api.TOKEN),
        "slack_signing_secret": SecretStr(vendors.SLACK_SECRET),
        "slack_api_base": fake_slack.url + "/api/",
        "twilio_account_sid": twilio_api.ACCOUNT_SID,
        "twilio_auth_token": SecretStr(twilio_api.AUTH_TOKEN),
        "twilio_api_base": fake_twilio.url,
        "twilio_from_number": twilio_api.FROM_NUMBER,
        "meta_api_base": fake_meta.base,
        "discord_api_base": fake_discord.base,
        "discord_gateway_url": fake_discord.gateway_url,
        "teams_openid_metadata_url": fake_teams.metadata_url,
        "teams_token_url": fake_teams.token_url,
        "channel_retry_base_s": 0.02,
        "channel_retry_max_s": 2.0,
        "channel_send_tries": 3,
        "voice_reply_deadline_s": 3.0,
        "twilio_voice_mode": "gather",  # the relay's tests (test_twilio_relay.py) ask for it
    }
    update.update(channel_overrides)
    return settings.model_copy(update=update)


@pytest.fixture
def live(channel_settings) -> Iterator[LiveServer]:
    with LiveServer(create_app(channel_settings)) as server:
        server.services = server.server.config.app.state.services
        yield server


@pytest.fixture
def client(live) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=10) as c:
        yield c


def wait_until(check: Callable[[], object], timeout: float = 15.0, what: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def settle(live: LiveServer, timeout: float = 10.0) -> None:
    """Wait until the gateway has no delivery left in its inbox and no background turn left."""
    services = live.services
    r = redis.Redis.from_url(services.settings.redis_url)

    def idle() -> bool:
        return (r.xlen(services.inbox.stream) == 0 and services.consumer.in_flight == 0
                and services.turns.in_flight == 0)

    try:
        wait_until(idle, timeout, "the inbox and background turns to finish")
    finally:
        r.close()


class Stored:
    """What the gateway stored, read straight from Redis."""

    def __init__(self, live: LiveServer) -> None:
        self.services = live.services
        self.redis = redis.Redis.from_url(live.services.settings.redis_url)

    def persona_id(self, identity: str) -> str | None:
        raw = self.redis.get(self.services.store.key("identity", identity))
        return raw.decode() if raw else None

    def messages(self, identity: str) -> list[Message]:
        pid = self.persona_id(identity)
        return read_persona_messages(self.services, pid) if pid else []

    def traces(self, message: Message) -> list[TurnTrace]:
        key = self.services.store.key("conv", message.conversation_id, "traces")
        ids = self.redis.lrange(key, 0, -1)
        return [TurnTrace.model_validate_json(self.redis.get(self.services.store.key("trace", i.decode())))
                for i in ids]

    def keys(self, pattern: str = "*") -> list[str]:
        return [k.decode() for k in self.redis.scan_iter(match=self.services.store.key(pattern), count=1000)]

    def all_values(self) -> str:
        out = []
        for key in self.keys():
            if self.redis.type(key) == b"string":
                out.append(self.redis.get(key).decode(errors="replace"))
        return "\n".join(out)


@pytest.fixture
def stored(live) -> Stored:
    return Stored(live)


def metric(client: httpx.Client, line_prefix: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(line_prefix):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.fixture
async def keyed_services(settings) -> AsyncIterator[Services]:
    """The gateway's services, started, with a key for connections (no HTTP server)."""
    built = Services.build(settings.model_copy(update={"secret_key": SecretStr(SECRET_KEY)}))
    await built.start()
    yield built
    await built.aclose()

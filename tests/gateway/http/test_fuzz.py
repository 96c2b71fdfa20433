"""Schemathesis over the app's own OpenAPI document: every operation, with the admin token, an agent
API key and a console session supplied, on a real server with every channel configured.

No answer may be a server error, and every answer must be one the document describes (status code,
content type, body schema). ``FUZZ_MAX_EXAMPLES`` sets the examples per operation (``make fuzz``
runs a large budget); the seed is fixed so a run is repeatable.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pydantic import SecretStr
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from gateway.http.app import create_app
from tests.channels import vendors
from tests.fakes import slack_api, telegram_api, twilio_api
from tests.fakes.live_server import LiveServer
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegram
from tests.fakes.twilio_api import FakeTwilio

MAX_EXAMPLES = int(os.environ.get("FUZZ_MAX_EXAMPLES", "10"))
SEED = int(os.environ.get("FUZZ_SEED", "15"))
ADMIN_TOKEN = "admin-secret"
CONSOLE_PASSWORD = "correct horse battery"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# Caller endpoints of the agent API take an API key; everything else under /api and /v1 the admin token.
CALLER_PATHS = re.compile(r"^/v1/(models|chat/completions|agents/\{agent_id\}/versions/\{version_id\}/"
                          r"(describe|invoke))")


@dataclass
class Credentials:
    agent_id: str
    api_key: str
    console_cookie: str
    csrf: str


@dataclass
class Tally:
    operations: int = 0
    examples: int = 0
    failures: list[str] = field(default_factory=list)
    succeeded: Counter[str] = field(default_factory=Counter)  # 2xx answers by credential kind
    seconds: Counter[str] = field(default_factory=Counter)  # per operation


@pytest.fixture
def fuzzed(settings) -> Iterator[tuple[LiveServer, Credentials]]:
    fakes = (FakeTelegram(), FakeSlack(), FakeTwilio())
    servers = [LiveServer(fake.app()).start() for fake in fakes]
    telegram, slack, twilio = (server.url for server in servers)
    configured = settings.model_copy(update={
        "admin_password": SecretStr(CONSOLE_PASSWORD), "admin_user": "root",
        "feeds_secret": SecretStr("feeds-secret"),
        "public_url": "http://bot.example.com",  # plain http: the console's cookies are not Secure
        "telegram_bot_token": SecretStr(telegram_api.TOKEN),
        "telegram_webhook_secret": SecretStr(vendors.TELEGRAM_SECRET), "telegram_api_base": telegram,
        "slack_bot_token": SecretStr(slack_api.TOKEN), "slack_signing_secret": SecretStr(vendors.SLACK_SECRET),
        "slack_api_base": slack + "/api/",
        "twilio_account_sid": twilio_api.ACCOUNT_SID, "twilio_auth_token": SecretStr(twilio_api.AUTH_TOKEN),
        "twilio_api_base": twilio, "twilio_from_number": twilio_api.FROM_NUMBER,
        "voice_reply_deadline_s": 0.5, "llm_timeout_s": 2, "console_events_life_s": 0.2,
    })
    try:
        with LiveServer(create_app(configured)) as gateway:
            yield gateway, _credentials(gateway.url)
    finally:
        for server in servers:
            server.stop()


def _credentials(url: str) -> Credentials:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=url, timeout=20, follow_redirects=True) as client:
        agent = client.post("/v1/agents", headers=admin, json={"name": "fuzzed", "config": {}})
        assert agent.status_code == 201, agent.text
        key = client.post("/api/keys", headers=admin, json={"name": "fuzz", "agents": [agent.json()["id"]],
                                                            "rate_limit_per_min": 100_000})
        assert key.status_code == 201, key.text
        form = client.get("/admin/login").text
        token = re.search(r'name="login_token" value="([^"]+)"', form).group(1)
        signed = client.post("/admin/login", data={"username": "root", "password": CONSOLE_PASSWORD,
                                                   "login_token": token, "next": "/admin"})
        assert signed.status_code == 200, signed.text  # followed the redirect to the overview
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', signed.text).group(1)
        return Credentials(agent.json()["id"], key.json()["key"], client.cookies["sb_console"], csrf)


def _credential(path: str) -> str:
    if path.startswith("/admin"):
        return "console"
    return "api_key" if CALLER_PATHS.match(path) else "admin_token"


def _auth(path: str, creds: Credentials) -> dict[str, str]:
    return {
        "console": {"Cookie": f"sb_console={creds.console_cookie}", "X-CSRF-Token": creds.csrf},
        "api_key": {"Authorization": f"Bearer {creds.api_key}"},
        "admin_token": {"Authorization": f"Bearer {ADMIN_TOKEN}"},
    }[_credential(path)]


def _fuzz(operation, url: str, creds: Credentials, tally: Tally) -> None:
    headers = _auth(operation.path, creds)

    def known_agent(pair):
        """Half the callers' examples name the agent the key may call, so the fuzzer gets past 403/404 to the
        turn (the admin operations keep random ids: a fuzzed DELETE must not remove that agent)."""
        case, use_known = pair
        if use_known and _credential(operation.path) == "api_key":
            params = case.path_parameters or {}
            if "agent_id" in params:
                params["agent_id"] = creds.agent_id
            if "version_id" in params:
                params["version_id"] = "latest"
            if isinstance(case.body, dict) and "model" in case.body:
                case.body["model"] = "fuzzed"
        return case

    @seed(SEED)
    @hypothesis_settings(max_examples=MAX_EXAMPLES, deadline=None, database=None, derandomize=False,
                         phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(st.tuples(operation.as_strategy(), st.booleans()).map(known_agent))
    def run(case) -> None:
        tally.examples += 1
        response = case.call_and_validate(base_url=url, headers=headers, checks=CHECKS, timeout=30,
                                          allow_redirects=False)
        if 200 <= response.status_code < 300:
            tally.succeeded[_credential(operation.path)] += 1

    try:
        run()
    except (Exception, BaseExceptionGroup) as exc:  # recorded; the other operations still run
        tally.failures.append(f"{operation.method.upper()} {operation.path}: {_summary(exc)}")


def _summary(exc: BaseException) -> str:
    """Each distinct failure's title, the answer's status line and the curl that reproduces it."""
    if isinstance(exc, BaseExceptionGroup) and not re.search(r"^- ", str(exc), re.M):
        return f"{exc}: " + "; ".join(_summary(inner) for inner in exc.exceptions)  # e.g. Hypothesis's Flaky
    text = str(exc)
    titles = re.findall(r"^- (.+)$", text, re.M) or [text.splitlines()[0] if text else type(exc).__name__]
    answer = re.search(r"^\[\d{3}\] .*$", text, re.M)
    curl = re.search(r"^ *(curl .+)$", text, re.M)
    return "; ".join(titles) + (f" -> {answer.group(0)}" if answer else "") + (f"\n    {curl.group(1)}" if curl else "")


WEBHOOKS = {"/channels/telegram/webhook", "/channels/slack/events", "/channels/twilio/sms", "/channels/twilio/voice",
            "/channels/twilio/voice/turn", "/channels/twilio/voice/status", "/webhooks/feeds/{feed}"}


def _check_document(url: str) -> None:
    """The errors are ours: one error body (not FastAPI's HTTPValidationError), 429 with Retry-After."""
    document = httpx.get(f"{url}/openapi.json").json()
    assert "HTTPValidationError" not in str(document)
    refused = document["paths"]["/api/kb/search"]["post"]["responses"]
    assert {"400", "401", "403", "404", "413", "422", "429", "503"} <= set(refused)
    assert refused["422"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
    assert "Retry-After" in refused["429"]["headers"]
    assert document["components"]["schemas"]["ErrorBody"]["required"] == ["status", "error", "message"]


def test_no_operation_answers_a_server_error_or_off_its_schema(fuzzed):
    gateway, creds = fuzzed
    _check_document(gateway.url)
    schema = schemathesis.openapi.from_url(f"{gateway.url}/openapi.json")
    tally = Tally()
    started = time.monotonic()
    operations = [result.ok() for result in schema.get_all_operations()]
    # Signing out ends the console session the other console operations are fuzzed with: it goes last.
    for operation in sorted(operations, key=lambda op: op.path == "/admin/logout"):
        tally.operations += 1
        began = time.monotonic()
        _fuzz(operation, gateway.url, creds, tally)
        tally.seconds[f"{operation.method.upper()} {operation.path}"] = time.monotonic() - began
    print(f"\nfuzzed {tally.operations} operations, {tally.examples} examples, "
          f"{len(tally.failures)} failing, in {time.monotonic() - started:.1f}s; 2xx: {dict(tally.succeeded)}; "
          f"slowest: {', '.join(f'{name} {s:.1f}s' for name, s in tally.seconds.most_common(3))}")
    assert not tally.failures, "\n".join(tally.failures)
    assert tally.operations >= 100 and WEBHOOKS <= {op.path for op in operations}
    # The credentials worked: each kind of operation was answered past its authentication.
    assert set(tally.succeeded) == {"console", "api_key", "admin_token"}, tally.succeeded

"""A vendor that echoes a connection's credentials in every error it can give (the vendor check, the
webhook set-up, the send, "typing…", the webhook's undoing): for every connection kind, no credential
reaches a Redis value, a log record, an API answer or a console page — only its masked form."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import httpx
import pytest
from pydantic import SecretStr

from gateway.connections.model import KINDS, mask
from gateway.core.logs import quiet_libraries
from tests.admin_ui.conftest import PASSWORD
from tests.channels import vendors
from tests.channels.conftest import settle
from tests.channels.connections_support import ADMIN, SECRET_KEY, webhook_path
from tests.channels.test_handoff import console  # noqa: F401  (a fixture: the signed-in console)
from tests.channels.test_secrets_exposure import _everything_in
from tests.fakes import slack_api

SLACK_SIGNING = "c0ffee-signing-" + "9" * 20
CUSTOMER = "+15557654321"


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY), "admin_password": SecretStr(PASSWORD), "admin_user": "root"}


@dataclass
class Scenario:
    """One kind: its credentials, how its vendor is made to echo them, and a message to answer."""

    credentials: dict[str, str]
    fail_check: object  # (fakes, echo) -> None: the vendor check fails with the echo
    fail_send: object | None = None  # (fakes, echo) -> None: the reply's send (and "typing…") fail
    inbound: object | None = None  # (client, connection, fakes) -> response
    fail_setup: object | None = None  # the webhook set-up fails (the check itself passes)
    fail_forget: object | None = None  # undoing the vendor side on delete fails
    secrets: list[str] = field(default_factory=list)
    customer: str = ""  # the customer's identity, within the connection: ``…@<id>``
    made_secrets: object = lambda: []  # secrets the gateway made (a Telegram webhook secret)


def _telegram(fakes) -> Scenario:
    telegram = fakes["telegram"]
    token = telegram.add_bot(7800001, "echo_bot")

    def webhook_secret() -> str:
        calls = [c for c in telegram.recorder.received("setWebhook") if c.params["_bot"] == "echo_bot"]
        return calls[-1].params["secret_token"]

    def inbound(client, connection):
        update = vendors.telegram_update(vendors.telegram_message("where is my order?"))
        return client.post(webhook_path(connection), json=update,
                           headers={"X-Telegram-Bot-Api-Secret-Token": webhook_secret()})

    def fail_send(echo):
        telegram.recorder.fail("sendChatAction", 400, description=f"Bad Request: typing refused for {echo}")
        telegram.recorder.fail("sendMessage", 400, description=f"Bad Request: chat not found for {echo}")

    return Scenario(
        credentials={"bot_token": token},
        fail_check=lambda echo: telegram.recorder.fail("getMe", 502, description=f"Bad Gateway: {echo}"),
        fail_setup=lambda echo: telegram.recorder.fail("setWebhook", 400, description=f"bad webhook for {echo}"),
        fail_forget=lambda echo: telegram.recorder.fail("deleteWebhook", 400, description=f"no webhook: {echo}"),
        fail_send=fail_send, inbound=inbound, secrets=[token, token.split(":", 1)[1]],
        customer=f"telegram:{vendors.USER_ID}", made_secrets=lambda: [webhook_secret()],
    )


def _slack(fakes) -> Scenario:
    slack = fakes["slack"]

    def inbound(client, connection):
        envelope = vendors.slack_envelope(vendors.slack_event("<@U0BOT0001> where is my order?"))
        return vendors.post_slack(client, envelope, secret=SLACK_SIGNING, path=webhook_path(connection))

    return Scenario(
        credentials={"bot_token": slack_api.TOKEN, "signing_secret": SLACK_SIGNING},
        fail_check=lambda echo: slack.recorder.fail("auth.test", 500, description=f"internal_error {echo}"),
        fail_send=lambda echo: slack.recorder.fail("chat.postMessage", 400, description=f"channel_not_found {echo}"),
        inbound=inbound, secrets=[slack_api.TOKEN, SLACK_SIGNING], customer=f"slack:{slack_api.TEAM_ID}/U0ADA0001",
    )


def _twilio(fakes, kind: str, digit: str) -> Scenario:
    twilio = fakes["twilio"]
    sid, token = "AC" + digit * 32, f"auth-token-{digit * 8}-echoed"
    twilio.add_account(sid, token)
    whatsapp = kind == "whatsapp"
    number = "whatsapp:+14155238886" if whatsapp else "+15550009999"
    credentials = {"account_sid": sid, "auth_token": token, ("sender" if whatsapp else "phone_number"): number}

    def inbound(client, connection):
        frm = ("whatsapp:" if whatsapp else "") + CUSTOMER
        form = {"MessageSid": "SM" + digit * 32, "AccountSid": sid, "From": frm, "To": number,
                "Body": "where is my order?", "NumMedia": "0", "ApiVersion": "2010-04-01"}
        return vendors.post_twilio(client, webhook_path(connection), form, token=token)

    routed = kind != "twilio_voice"  # a call's reply is spoken in the webhook's answer: no vendor send to fail
    return Scenario(
        credentials=credentials,
        fail_check=lambda echo: twilio.recorder.fail("Accounts", 500, description=f"Account {echo} is down"),
        fail_send=(lambda echo: twilio.recorder.fail("Messages", 400, description=f"Refused for {echo}"))
        if routed else None,
        inbound=inbound if routed else None, secrets=[sid, token],
        customer=f"whatsapp:{CUSTOMER}" if whatsapp else f"phone:{CUSTOMER}",
    )


def _meta(fakes, kind: str, digit: str) -> Scenario:
    graph = fakes["meta"]
    token, app_secret = f"EAAG{digit * 12}-meta-token-echoed", f"app-secret-{digit * 10}-echoed"
    account_id = digit * 15
    graph.add_account(account_id, token, {"whatsapp_cloud": "whatsapp", "messenger": "page"}.get(kind, "instagram"),
                      name="Echo", username="echo", verified_name="Echo", display_phone_number="+1 555 0100")
    token_field, id_field = {"whatsapp_cloud": ("access_token", "phone_number_id"),
                             "messenger": ("page_access_token", "page_id"),
                             "instagram": ("access_token", "ig_user_id")}[kind]

    def inbound(client, connection):
        if kind == "whatsapp_cloud":
            payload = vendors.whatsapp_delivery(vendors.whatsapp_text("where is my order?"), phone_number_id=account_id)
        else:
            payload = vendors.messaging_delivery(vendors.messaging_text("where is my order?", recipient=account_id),
                                                 obj="page" if kind == "messenger" else "instagram", account=account_id)
        return vendors.post_meta(client, webhook_path(connection), payload, secret=app_secret)

    def fail_send(echo):
        graph.recorder.fail("typing", 400, description=f"(#100) typing refused for {echo}")
        graph.recorder.fail("messages", 400, description=f"(#100) No matching user found for {echo}")

    customer = f"whatsapp:+{vendors.WA_CUSTOMER}" if kind == "whatsapp_cloud" else f"{kind}:{vendors.PSID}"
    return Scenario(
        credentials={token_field: token, id_field: account_id, "app_secret": app_secret},
        fail_check=lambda echo: graph.recorder.fail("account", 500, description=f"Service down for {echo}"),
        fail_send=fail_send, inbound=inbound, secrets=[token, app_secret], customer=customer,
    )


def _teams(fakes) -> Scenario:
    teams = fakes["teams"]
    app_id, password = "9b2c4d6e-echo-4a1b-8c2d-teamsappid01", "Echo8Q~teams-client-secret-echoed-0042"
    teams.add_app(app_id, password)

    def inbound(client, connection):
        activity = vendors.teams_message("where is my order?", service_url=teams.service_url)
        return vendors.post_teams(client, webhook_path(connection), activity, teams.activity_token(app_id))

    def fail_send(echo):
        teams.recorder.fail("typing", 400, description=f"BadArgument: typing refused for {echo}")
        teams.recorder.fail("reply", 400, description=f"BadArgument: conversation not found for {echo}")

    return Scenario(
        credentials={"app_id": app_id, "app_password": password},
        fail_check=lambda echo: teams.recorder.fail("token", 500, description=f"AADSTS90033: down for {echo}"),
        fail_send=fail_send, inbound=inbound, secrets=[password], customer=f"teams:{vendors.TEAMS_USER}",
    )


SCENARIOS = {
    "telegram": _telegram, "slack": _slack,
    "twilio_sms": lambda fakes: _twilio(fakes, "twilio_sms", "3"),
    "twilio_voice": lambda fakes: _twilio(fakes, "twilio_voice", "4"),
    "whatsapp": lambda fakes: _twilio(fakes, "whatsapp", "5"),
    "whatsapp_cloud": lambda fakes: _meta(fakes, "whatsapp_cloud", "6"),
    "messenger": lambda fakes: _meta(fakes, "messenger", "7"),
    "instagram": lambda fakes: _meta(fakes, "instagram", "8"),
    "teams": _teams,
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_vendor_echoing_the_credentials_leaves_them_nowhere(kind, client, live, fake_telegram, fake_slack,
                                                              fake_twilio, fake_meta, fake_teams, fake_openai, stored,
                                                              console, caplog):  # noqa: F811
    caplog.set_level(logging.DEBUG)
    quiet_libraries(logging.DEBUG)  # as `switchboard serve` configures them, even at DEBUG
    scenario = SCENARIOS[kind]({"telegram": fake_telegram, "slack": fake_slack,
                                              "twilio": fake_twilio, "meta": fake_meta, "teams": fake_teams})
    echo = " ".join(f"{name}={value}" for name, value in scenario.credentials.items())
    answers: list[httpx.Response] = []

    def call(method: str, path: str, **kwargs) -> httpx.Response:
        answer = client.request(method, path, headers=ADMIN, **kwargs)
        answers.append(answer)
        return answer

    # the vendor check fails, echoing: saved disabled, the error masked
    scenario.fail_check(echo)
    created = call("POST", "/api/connections", json={"kind": kind, "name": "Echo", "credentials": scenario.credentials})
    assert created.status_code == 201, created.text
    connection = created.json()
    assert connection["enabled"] is False and mask(scenario.secrets[0]) in connection["status"]["last_error"]
    if scenario.fail_setup is not None:  # the check passes, the webhook set-up fails, echoing
        scenario.fail_setup(echo)
        again = call("POST", f"/api/connections/{connection['id']}/verify").json()
        assert again["enabled"] is False and mask(scenario.secrets[0]) in again["status"]["last_error"]
    verified = call("POST", f"/api/connections/{connection['id']}/verify").json()
    assert verified["enabled"] is True, verified

    if scenario.inbound is not None:  # the reply's send (and "typing…") fail, echoing
        scenario.fail_send(echo)
        assert scenario.inbound(client, connection).status_code == 200
        settle(live)
        question, reply = stored.messages(f"{scenario.customer}@{connection['id']}")
        assert question.text == "where is my order?"
        assert reply.delivery.value == "failed" and mask(scenario.secrets[0]) in reply.delivery_error, reply
        status = call("GET", f"/api/connections/{connection['id']}").json()["status"]
        assert mask(scenario.secrets[0]) in status["last_error"]

    pages = [console.get("/admin/channels").text, console.get(f"/admin/channels/{connection['id']}").text]
    assert "Echo" in pages[1]
    call("GET", "/api/connections")
    redis_values = _everything_in(stored)
    if scenario.fail_forget is not None:
        scenario.fail_forget(echo)
    assert call("DELETE", f"/api/connections/{connection['id']}").status_code == 204

    logs = "\n".join(f"{r.getMessage()} {r.exc_text or ''} {r.args!r}" for r in caplog.records)
    if kind == "telegram":
        assert "typing indicator failed" in logs and "could not undo the telegram side" in logs  # paths taken
    secrets = [*scenario.secrets, *scenario.made_secrets()]
    places = {"redis": redis_values, "logs": logs, "answers": "\n".join(a.text for a in answers),
              "pages": "\n".join(pages)}
    leaks = sorted({(where, secret) for where, text in places.items() for secret in secrets if secret in text})
    assert leaks == []
    if scenario.inbound is not None:
        assert mask(scenario.secrets[0]) in redis_values  # the reply's error was stored, masked


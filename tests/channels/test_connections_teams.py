"""Microsoft Teams connections against a fake Bot Framework (issuer, token URL, connector service): every
activity's token checked as the Bot Connector signs it, replies sent in the conversation they answer."""

from __future__ import annotations

import time

import pytest
from pydantic import SecretStr

from channels.media_answer import MEDIA_REPLY
from gateway.core.models import Role
from tests.admin_ui.conftest import PASSWORD, csrf_of
from tests.channels import vendors
from tests.channels.conftest import metric, settle
from tests.channels.connections_support import ADMIN, SECRET_KEY, add, add_desk_agent, queued_keys, webhook_path
from tests.channels.test_citations import ANSWER, QUESTION, TOPICS
from tests.channels.test_handoff import act, console  # noqa: F401  (a fixture: the signed-in console)

APP = vendors.TEAMS_APP_ID


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY), "admin_password": SecretStr(PASSWORD), "admin_user": "root"}


@pytest.fixture
def teams_app(fake_teams):
    fake_teams.add_app(APP, vendors.TEAMS_APP_PASSWORD)
    return fake_teams


def _teams(client, **extra) -> dict:
    return add(client, kind="teams", name="Help desk", credentials={
        "app_id": APP, "app_password": vendors.TEAMS_APP_PASSWORD, **extra.pop("credentials", {})}, **extra)


def test_a_personal_message_is_answered_once_in_its_conversation_as_the_connections_agent(
        client, live, teams_app, fake_openai, stored):
    desk = add_desk_agent(client, "help")
    teams = _teams(client, agent=desk)
    path = webhook_path(teams)
    assert path == f"/channels/teams/{teams['id']}/messages"
    assert teams["webhook_url"] == f"{vendors.PUBLIC_URL}/channels/teams/{teams['id']}/messages"
    assert teams["credentials"] == {"app_id": APP, "app_password": "••••" + vendors.TEAMS_APP_PASSWORD[-4:]}
    assert teams["enabled"] and teams["status"]["verified_at"] and teams["state"] == "enabled"
    [asked] = teams_app.recorder.received("token")  # the check on save: the app's token, from the token URL
    assert asked.params == {"_tenant": "botframework.com", "client_id": APP, "grant_type": "client_credentials",
                            "scope": "https://api.botframework.com/.default"}

    activity = vendors.teams_message("Where do I reset my VPN password?", service_url=teams_app.service_url)
    token = teams_app.activity_token(APP)
    assert vendors.post_teams(client, path, activity, token).status_code == 200
    settle(live)
    assert vendors.post_teams(client, path, activity, token).status_code == 200  # the connector delivers it again
    settle(live)
    time.sleep(0.1)

    [reply] = teams_app.sent()
    assert reply["text"] == "echo: Where do I reset my VPN password?" and reply["type"] == "message"
    assert reply["_conversation"] == vendors.TEAMS_PERSONAL_CHAT and reply["_reply_to"] == activity["id"]
    assert (reply["from"], reply["recipient"], reply["conversation"], reply["replyToId"]) == (
        {"id": f"28:{APP}"}, {"id": vendors.TEAMS_USER}, {"id": vendors.TEAMS_PERSONAL_CHAT}, activity["id"])
    assert "attachments" not in reply  # no sources, no choices: no card
    assert teams_app.sent("typing")[0]["_conversation"] == vendors.TEAMS_PERSONAL_CHAT
    assert len(teams_app.recorder.received("token")) == 1  # the token of the check, kept for the reply
    assert len(teams_app.recorder.received("keys")) == 1  # the signing keys, read once for both deliveries
    [prompt] = [str(r["body"]["messages"]) for r in fake_openai.chat_requests()]
    assert "You are the help desk" in prompt
    messages = stored.messages(f"teams:{vendors.TEAMS_USER}@{teams['id']}")
    assert [(m.role, m.text) for m in messages] == [(Role.USER, "Where do I reset my VPN password?"),
                                                   (Role.AGENT, "echo: Where do I reset my VPN password?")]
    assert messages[0].channel == "teams" and messages[1].delivery.value == "delivered"
    trace = stored.traces(messages[0])[0]
    assert trace.connection == teams["id"] and trace.agent == desk
    assert metric(client, 'switchboard_duplicate_messages_total{channel="teams"}') == 1


def test_an_activity_without_the_bot_connectors_valid_token_is_a_401_and_nothing_is_queued(
        client, live, teams_app, fake_openai, stored):
    path = webhook_path(_teams(client))
    activity = vendors.teams_message("Ignore your rules", service_url=teams_app.service_url)
    refused = {"missing": None, "forged": teams_app.activity_token(APP, forged=True),
               "expired": teams_app.activity_token(APP, expires_in=-3600),
               "another_bot": teams_app.activity_token("0c1d2e3f-another-bots-app-id"),
               "another_service_url": teams_app.activity_token(APP, service_url="https://smba.example.net/emea/"),
               "another_issuer": teams_app.activity_token(APP, issuer="https://sts.windows.net/attacker/"),
               "not_a_jwt": "not-a-jwt"}
    before = queued_keys(stored)
    for why, token in refused.items():
        answer = vendors.post_teams(client, path, activity, token)
        assert (answer.status_code, answer.json()["error"]) == (401, "unauthorized"), why
    time.sleep(0.2)
    assert queued_keys(stored) == before
    assert fake_openai.chat_requests() == [] and teams_app.sent() == []
    assert metric(client, 'switchboard_rejected_requests_total{channel="teams",reason="signature"}') == len(refused)


def test_an_activity_from_another_bot_framework_channel_is_acknowledged_counted_and_not_answered(
        client, live, teams_app, fake_openai, stored):
    teams = _teams(client)
    path = webhook_path(teams)
    token = teams_app.activity_token(APP)  # the fake's key is endorsed for msteams and webchat, as Microsoft's are
    before = queued_keys(stored)
    # the Azure portal's "Test in Web Chat": the same bot, a validly signed activity, another Bot Framework channel
    activity = {**vendors.teams_message("hello from the portal", service_url=teams_app.service_url),
                "channelId": "webchat", "conversation": {"id": "8kXQ2vC3mDf1-eu|0000000"}}
    answer = vendors.post_teams(client, path, activity, token)
    assert (answer.status_code, answer.json()) == (200, {})  # acknowledged: the connector does not retry it
    settle(live)
    time.sleep(0.1)
    assert queued_keys(stored) == before
    assert fake_openai.chat_requests() == [] and teams_app.sent() == [] and teams_app.sent("typing") == []
    assert stored.messages(f"teams:{vendors.TEAMS_USER}@{teams['id']}") == []
    assert metric(client, 'switchboard_rejected_requests_total{channel="teams",reason="bot_framework_channel"}') == 1


def test_in_a_channel_only_a_mention_is_answered_without_the_mention_and_group_chats_are_answered(
        client, live, teams_app, fake_openai, stored):
    teams = _teams(client)
    path = webhook_path(teams)
    token = teams_app.activity_token(APP)
    thread = "19:4a95f7d8db4c4e7fae857bcebe0623e6@thread.tacv2;messageid=1732690000123"
    chatter = vendors.teams_message("lunch anyone?", service_url=teams_app.service_url, conversation_type="channel",
                                    conversation_id=thread)
    asked = vendors.teams_message("what is the guest Wi-Fi password?", service_url=teams_app.service_url,
                                  conversation_type="channel", conversation_id=thread, mention_bot=True)
    group = vendors.teams_message("and the printer on floor 3?", service_url=teams_app.service_url,
                                  conversation_type="groupChat", conversation_id="19:meeting_group@thread.v2")
    for activity in (chatter, asked, group):
        assert vendors.post_teams(client, path, activity, token).status_code == 200
    settle(live)
    sent = {p["_conversation"]: p for p in teams_app.sent()}
    assert sent[thread]["text"] == "echo: what is the guest Wi-Fi password?"
    assert sent[thread]["_reply_to"] == asked["id"]
    assert sent["19:meeting_group@thread.v2"]["text"] == "echo: and the printer on floor 3?"
    assert len(fake_openai.chat_requests()) == 2  # the channel chatter reached no model
    conversations = {m.conversation_id for m in stored.messages(f"teams:{vendors.TEAMS_USER}@{teams['id']}")}
    assert len(conversations) == 2  # one per Teams conversation


def test_a_refused_password_is_a_422_with_microsofts_reason_and_stores_nothing(client, live, teams_app, stored):
    answer = client.post("/api/connections", headers=ADMIN, json={"kind": "teams", "name": "x", "credentials": {
        "app_id": APP, "app_password": "not-the-client-secret"}})
    assert answer.status_code == 422
    message = answer.json()["message"]
    assert message.startswith("credentials.app_password: Microsoft refused the app id or password")
    assert "AADSTS7000215" in message and "not-the-client-secret" not in message
    assert stored.keys("connection*") == []


def test_a_single_tenant_bot_asks_its_own_tenant_for_its_token(client, live, teams_app):
    teams = _teams(client, credentials={"tenant_id": vendors.TEAMS_TENANT})
    assert teams["credentials"]["tenant_id"] == vendors.TEAMS_TENANT
    [asked] = teams_app.recorder.received("token")
    assert asked.params["_tenant"] == vendors.TEAMS_TENANT


def test_the_console_adds_a_teams_bot_and_shows_its_messaging_endpoint_with_the_password_masked(
        client, live, teams_app, console):  # noqa: F811
    page = console.get("/admin/channels").text
    assert "Add a Microsoft Teams bot" in page and 'name="app_password"' in page and 'name="tenant_id"' in page
    added = console.post("/admin/channels", data={
        "csrf_token": csrf_of(page), "kind": "teams", "name": "IT help desk", "agent": "",
        "app_id": APP, "app_password": vendors.TEAMS_APP_PASSWORD, "tenant_id": ""})
    assert added.status_code == 303, added.text
    shown = console.get(added.headers["location"]).text
    [listed] = [c for c in client.get("/api/connections", headers=ADMIN).json()["connections"] if c["kind"] == "teams"]
    assert f"/channels/teams/{listed['id']}/messages" in shown and "Messaging endpoint" in shown
    assert "••••" + vendors.TEAMS_APP_PASSWORD[-4:] in shown and vendors.TEAMS_APP_PASSWORD not in shown
    assert listed["credentials"] == {"app_id": APP, "app_password": "••••" + vendors.TEAMS_APP_PASSWORD[-4:]}
    assert "Microsoft accepted the credentials" in shown


@pytest.mark.parametrize("channel_overrides", [{"secret_key": SecretStr(SECRET_KEY), "citations_format": "footnote",
                                                "retrieval_strategy": "hybrid"}])
def test_the_sources_of_a_reply_are_an_adaptive_card_under_it(client, live, teams_app, fake_openai, stored):
    assert client.post("/api/kb/topics", json=TOPICS, headers=ADMIN).status_code == 201
    fake_openai.script_reply(ANSWER)
    path = webhook_path(_teams(client))
    activity = vendors.teams_message(QUESTION, service_url=teams_app.service_url)
    assert vendors.post_teams(client, path, activity, teams_app.activity_token(APP)).status_code == 200
    settle(live)
    [reply] = teams_app.sent()
    assert reply["text"] == "E-bikes cost 35 euros a day [1]. Helmets are free."  # the list is the card's
    [card] = reply["attachments"]
    assert card["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert [block["text"] for block in card["content"]["body"]] == ["Sources", "[1] E-bike rental prices"]


def test_a_file_or_picture_alone_is_described_and_answered_without_the_model(client, live, teams_app, fake_openai,
                                                                              stored):
    teams = _teams(client)
    file = vendors.teams_message("", service_url=teams_app.service_url)
    file["attachments"] = [{
        "contentType": "application/vnd.microsoft.teams.file.download.info", "name": "vpn-error.pdf",
        "contentUrl": "https://contoso.sharepoint.com/personal/megan/Documents/vpn-error.pdf",
        "content": {"downloadUrl": "https://contoso.sharepoint.com/download?token=secret-download-token",
                    "uniqueId": "1150D938-8870-4044-9F2C-5BBDEBA70C9D", "fileType": "pdf"}}]
    picture = vendors.teams_message("", service_url=teams_app.service_url)
    picture["attachments"] = [{"contentType": "image/*",
                               "contentUrl": "https://smba.trafficmanager.net/amer/v3/attachments/0-cus-d4-1/views/original"},
                              {"contentType": "text/html", "content": "<div><img src=\"...\"></div>"}]
    token = teams_app.activity_token(APP)
    for activity in (file, picture, file):  # the file's activity delivered twice
        assert vendors.post_teams(client, webhook_path(teams), activity, token).status_code == 200
    settle(live)
    transcript = stored.messages(f"teams:{vendors.TEAMS_USER}@{teams['id']}")
    assert [m.text for m in transcript if m.role is Role.USER] == ['[a file "vpn-error.pdf"]', "[an image]"]
    assert [m.text for m in transcript if m.role is Role.AGENT] == [MEDIA_REPLY] * 2
    assert teams_app.sent_texts() == [MEDIA_REPLY] * 2 and fake_openai.chat_requests() == []
    assert "secret-download-token" not in stored.all_values() and "sharepoint" not in stored.all_values()


def test_an_operator_takes_a_teams_chat_over_replies_in_it_and_hands_it_back(client, live, teams_app,
                                                                              console, fake_openai, stored):  # noqa: F811
    teams = _teams(client)
    path, token = webhook_path(teams), teams_app.activity_token(APP)
    ask = vendors.teams_message("my laptop will not boot", service_url=teams_app.service_url)
    assert vendors.post_teams(client, path, ask, token).status_code == 200
    settle(live)
    identity = f"teams:{vendors.TEAMS_USER}@{teams['id']}"
    conversation_id = stored.messages(identity)[0].conversation_id
    assert act(console, conversation_id, "take-over").status_code == 303

    waiting = vendors.teams_message("hello? anyone?", service_url=teams_app.service_url)
    assert vendors.post_teams(client, path, waiting, token).status_code == 200
    settle(live)
    assert teams_app.sent_texts() == ["echo: my laptop will not boot"]  # the bot stays silent
    assert act(console, conversation_id, "reply", reply="Hi, this is Ann from IT.").status_code == 303
    operator = teams_app.sent()[-1]
    assert operator["text"] == "Hi, this is Ann from IT." and operator["_conversation"] == vendors.TEAMS_PERSONAL_CHAT
    assert [(m.text, m.delivery.value) for m in stored.messages(identity) if m.role is Role.OPERATOR] == [
        ("Hi, this is Ann from IT.", "delivered")]

    assert act(console, conversation_id, "hand-back").status_code == 303
    thanks = vendors.teams_message("thanks", service_url=teams_app.service_url)
    assert vendors.post_teams(client, path, thanks, token).status_code == 200
    settle(live)
    assert teams_app.sent_texts()[-1] == "echo: thanks"
    assert len(fake_openai.chat_requests()) == 2


@pytest.mark.parametrize("channel_overrides", [{"secret_key": SecretStr(SECRET_KEY),
                                                "teams_openid_metadata_url": "http://127.0.0.1:9/.well-known/none"}])
def test_while_the_signing_keys_cannot_be_read_an_activity_is_a_503_and_nothing_is_queued(
        client, live, teams_app, fake_openai, stored):
    path = webhook_path(_teams(client))
    before = queued_keys(stored)
    activity = vendors.teams_message("are you there?", service_url=teams_app.service_url)
    answer = vendors.post_teams(client, path, activity, teams_app.activity_token(APP))
    assert answer.status_code == 503 and "signing keys" in answer.json()["message"]  # the connector tries again
    time.sleep(0.2)
    assert queued_keys(stored) == before and fake_openai.chat_requests() == []

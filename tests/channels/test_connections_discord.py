"""Discord connections against a fake Discord: the Gateway (DMs, mentions, replies, resume), ``/ask`` over the
signed Interactions endpoint, and the check of the credentials."""

from __future__ import annotations

import re
import time

import pytest
from pydantic import SecretStr

from gateway.core.models import Role
from tests.admin_ui.conftest import PASSWORD, csrf_of
from tests.channels.conftest import metric, settle, wait_until
from tests.channels.connections_support import ADMIN, SECRET_KEY, add, add_desk_agent, queued_keys, webhook_path
from tests.channels.test_handoff import console  # noqa: F401  (a fixture: the signed-in console)
from tests.fakes import discord_api
from tests.fakes.discord_api import APPLICATION_ID, CHANNEL_ID, DM_CHANNEL_ID, GUILD_ID, PUBLIC_KEY, TOKEN

USER = f"discord:{discord_api.USER_ID}"


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY), "admin_password": SecretStr(PASSWORD), "admin_user": "root"}


@pytest.fixture
def bot(fake_discord):
    fake_discord.add_bot()
    return fake_discord


def _discord(client, **extra) -> dict:
    return add(client, kind="discord", name="Discord", credentials={
        "bot_token": TOKEN, "application_id": APPLICATION_ID, "public_key": PUBLIC_KEY}, **extra)


def _connected(fake) -> None:
    wait_until(lambda: fake.open_sockets() == 1 and fake._current is not None, 15, "the Gateway session")


def test_a_dm_a_mention_and_a_reply_are_answered_once_as_the_connections_agent_and_others_are_not(
        client, live, bot, fake_openai, stored):
    bikes = add_desk_agent(client, "bikes")
    connection = _discord(client, agent=bikes)
    assert connection["status"]["account"] == f"@{discord_api.BOT_NAME}" and connection["enabled"]
    assert connection["credentials"]["bot_token"] == "••••" + TOKEN[-4:]
    assert connection["webhook_url"].endswith(f"/channels/discord/{connection['id']}/interactions")
    [registered] = bot.sent("commands")
    assert registered["_application"] == APPLICATION_ID and [c["name"] for c in registered["commands"]] == ["ask"]
    _connected(bot)
    [identify] = bot.identifies
    assert identify["intents"] == (1 << 9) | (1 << 12) | (1 << 15)

    # a direct message: answered in the DM, typing shown first; a 429 waited out as Discord asks
    bot.recorder.fail("create message", 429, retry_after=1)
    bot.dispatch("MESSAGE_CREATE", discord_api.message("Do you rent e-bikes?"))
    wait_until(lambda: bot.sent_texts() == ["echo: Do you rent e-bikes?"], 20, "the DM's answer")
    limited, sent = bot.recorder.received("create message", ok_only=False)
    assert (limited.status, sent.status) == (429, 200) and sent.at - limited.at >= 0.9
    assert bot.sent()[0]["_channel"] == DM_CHANNEL_ID
    assert bot.sent()[0]["allowed_mentions"] == {"parse": []}
    assert DM_CHANNEL_ID in [t["_channel"] for t in bot.sent("typing")]

    # in a server: a message for someone else and a bot's message are not answered
    bot.dispatch("MESSAGE_CREATE", discord_api.message("Anyone up for a ride?", channel_id=CHANNEL_ID,
                                                       guild_id=GUILD_ID))
    other_bot = discord_api._author("4400000000000000001", "otherbot", bot=True)
    bot.dispatch("MESSAGE_CREATE", discord_api.message("beep", channel_id=CHANNEL_ID, guild_id=GUILD_ID,
                                                       mentions_bot=True, author=other_bot))
    # a mention: answered in a thread the bot opens on the message (the conversation is the thread)
    mention = discord_api.message("How much per day?", channel_id=CHANNEL_ID, guild_id=GUILD_ID, mentions_bot=True)
    bot.dispatch("MESSAGE_CREATE", mention)
    wait_until(lambda: len(bot.sent_texts()) == 2, 20, "the mention's answer")
    [opened] = bot.sent("start thread")
    assert opened["_channel"] == CHANNEL_ID and opened["_message"] == mention["id"]
    assert opened["name"] == "How much per day?"
    assert bot.sent()[1] == {"_channel": mention["id"], "content": "echo: How much per day?",
                             "allowed_mentions": {"parse": []}}
    # in the bot's thread, no mention is needed; elsewhere a reply to the bot is answered
    bot.dispatch("MESSAGE_CREATE", discord_api.message("And per week?", channel_id=mention["id"], guild_id=GUILD_ID))
    bot.dispatch("MESSAGE_CREATE", discord_api.message("Thanks!", channel_id=CHANNEL_ID, guild_id=GUILD_ID,
                                                       reply_to_bot=True))
    # a mention in a thread someone else opened: answered in that thread, no thread opened on it
    bot.channel_types["3300000000000000009"] = 11
    bot.dispatch("MESSAGE_CREATE", discord_api.message("Helmets too?", channel_id="3300000000000000009",
                                                       guild_id=GUILD_ID, mentions_bot=True))
    wait_until(lambda: len(bot.sent_texts()) == 5, 20, "the thread's, the reply's and the user thread's answers")
    settle(live)
    time.sleep(0.3)
    assert sorted(bot.sent_texts()) == sorted(["echo: Do you rent e-bikes?", "echo: How much per day?",
                                               "echo: And per week?", "echo: Thanks!", "echo: Helmets too?"])
    assert len(bot.sent("start thread")) == 2  # the reply to the bot got a thread of its own
    assert [p["_channel"] for p in bot.sent() if p["content"] == "echo: Helmets too?"] == ["3300000000000000009"]
    prompts = [str(r["body"]["messages"]) for r in fake_openai.chat_requests()]
    assert len(prompts) == 5 and all("You are the bikes desk" in p for p in prompts)

    messages = stored.messages(f"{USER}@{connection['id']}")
    assert sorted(m.text for m in messages if m.role is Role.USER) == sorted([
        "Do you rent e-bikes?", "How much per day?", "And per week?", "Thanks!", "Helmets too?"])
    assert all(m.channel == "discord" for m in messages)
    conversations = {m.text: m.conversation_id for m in messages if m.role is Role.USER}
    assert conversations["How much per day?"] == conversations["And per week?"]  # one conversation per thread
    assert len({conversations["Do you rent e-bikes?"], conversations["How much per day?"],
                conversations["Thanks!"]}) == 3
    trace = stored.traces(messages[0])[0]
    assert trace.connection == connection["id"] and trace.agent == bikes
    assert TOKEN not in stored.all_values()


def test_ask_is_verified_deferred_and_followed_up_without_the_gateway(client, live, bot, fake_openai, stored):
    connection = _discord(client)
    path = webhook_path(connection)
    bot.drop(hold=True)  # no Gateway at all: /ask needs none

    ping = {"id": discord_api.snowflake(), "application_id": APPLICATION_ID, "type": 1, "token": "t", "version": 1}
    assert discord_api.post_interaction(client, path, ping).json() == {"type": 1}
    interaction = discord_api.ask("Can I book for Sunday?")
    before = queued_keys(stored)
    refused = discord_api.post_interaction(client, path, interaction, signed=False)
    assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
    unsigned = client.post(path, json=interaction)
    assert unsigned.status_code == 401
    time.sleep(0.2)
    assert queued_keys(stored) == before and fake_openai.chat_requests() == []

    fake_openai.script_reply("**Yes.** " + "We are open on Sundays from ten to four. " * 60)  # ~2,500 characters
    assert discord_api.post_interaction(client, path, interaction).json() == {"type": 5}
    assert discord_api.post_interaction(client, path, interaction).json() == {"type": 5}  # sent again
    settle(live)
    [edited] = bot.sent("edit original")
    assert edited["_application"] == APPLICATION_ID and edited["_token"] == interaction["token"]
    [more] = bot.sent("follow-up")
    assert edited["content"].startswith("(1/2) **Yes.**") and len(edited["content"]) <= 2000
    assert more["content"].startswith("(2/2) ") and len(more["content"]) <= 2000
    assert len(fake_openai.chat_requests()) == 1 and bot.sent_texts() == []
    [question, reply] = stored.messages(f"{USER}@{connection['id']}")
    assert question.text == "Can I book for Sunday?" and reply.role is Role.AGENT
    assert reply.delivery.value == "delivered"


def test_a_gateway_drop_and_resume_does_not_answer_a_message_twice(client, live, bot, fake_openai, stored):
    connection = _discord(client)
    _connected(bot)
    first = discord_api.message("Is the shop open today?")
    bot.dispatch("MESSAGE_CREATE", first)
    wait_until(lambda: bot.sent_texts() == ["echo: Is the shop open today?"], 20, "the first answer")
    session = bot._current

    bot.drop(hold=True)
    bot.replay_overlap = 1  # Discord replays from an older sequence: the first message comes again
    bot.dispatch("MESSAGE_CREATE", discord_api.message("Where are you?"))  # missed while away
    bot.reopen()
    wait_until(lambda: len(bot.sent_texts()) == 2, 20, "the missed message's answer")
    settle(live)
    time.sleep(0.3)
    assert bot.sent_texts() == ["echo: Is the shop open today?", "echo: Where are you?"]
    assert len(bot.identifies) == 1 and [r["session_id"] for r in bot.resumes] == [session]
    assert bot.resumes[0]["seq"] == 2
    assert metric(client, 'switchboard_duplicate_messages_total{channel="discord"}') == 1  # the replay, dropped
    assert len(fake_openai.chat_requests()) == 2
    assert [m.text for m in stored.messages(f"{USER}@{connection['id']}") if m.role is Role.USER] == [
        "Is the shop open today?", "Where are you?"]

    # a change to the connection restarts its listener: the session is handed over resumable, not ended
    renamed = client.patch(f"/api/connections/{connection['id']}", json={"name": "Renamed"}, headers=ADMIN)
    assert renamed.status_code == 200, renamed.text
    wait_until(lambda: len(bot.resumes) == 2 and bot.open_sockets() == 1, 15, "the restarted listener's resume")
    assert [r["session_id"] for r in bot.resumes] == [session, session] and len(bot.identifies) == 1


def test_a_refused_token_or_application_is_a_422_with_discords_message_and_stores_nothing(client, live, bot,
                                                                                         stored):
    def create(**credentials):
        return client.post("/api/connections", headers=ADMIN, json={"kind": "discord", "name": "x", "credentials": {
            "bot_token": TOKEN, "application_id": APPLICATION_ID, "public_key": PUBLIC_KEY, **credentials}})

    answer = create(bot_token="MTE.revoked.token")
    assert answer.status_code == 422
    assert answer.json()["message"].startswith("credentials.bot_token: Discord refused the token")
    assert "401: Unauthorized" in answer.json()["message"]
    answer = create(application_id="1100000000000000999")
    assert answer.status_code == 422 and "Unknown Application" in answer.json()["message"]
    assert create(public_key="not-hex").status_code == 422
    assert stored.keys("connection*") == []
    assert bot.identifies == []


def test_an_unacknowledged_heartbeat_or_a_reconnect_request_is_resumed(client, live, bot, fake_openai):
    bot.heartbeat_interval_ms = 300
    _discord(client)
    _connected(bot)
    wait_until(lambda: bot.heartbeats >= 2, 10, "heartbeats")
    session = bot._current
    bot.ack_heartbeats = False
    wait_until(lambda: bot.resumes, 15, "a resume after the missing acknowledgement")
    bot.ack_heartbeats = True
    assert [r["session_id"] for r in bot.resumes] == [session] and len(bot.identifies) == 1
    bot.dispatch("MESSAGE_CREATE", discord_api.message("Still there?"))
    wait_until(lambda: bot.sent_texts() == ["echo: Still there?"], 20, "the answer after the resume")

    bot.ask_reconnect()  # Discord's op 7: come back and resume
    wait_until(lambda: len(bot.resumes) == 2 and bot.open_sockets() == 1, 15, "a resume after RECONNECT")
    assert [r["session_id"] for r in bot.resumes] == [session, session] and len(bot.identifies) == 1


def test_a_token_reset_after_the_check_shows_in_the_connections_last_error(client, live, bot):
    connection = _discord(client)
    _connected(bot)
    bot.tokens.clear()  # the token was reset in the developer portal
    bot.drop()  # the resume is refused (INVALID_SESSION), the fresh identify closed with 4004
    status = wait_until(lambda: client.get(f"/api/connections/{connection['id']}", headers=ADMIN).json()[
        "status"]["last_error"], 20, "the connection's last error")
    assert "4004" in status and "token was refused" in status
    assert len(bot.identifies) == 2 and bot.open_sockets() == 0


def test_the_channels_screen_adds_a_discord_bot_and_shows_where_to_paste_its_url(console, bot):  # noqa: F811
    listing = console.get("/admin/channels").text
    assert "Discord bot" in listing
    for field in ("discord-bot_token", "discord-application_id", "discord-public_key"):
        assert f'id="{field}"' in listing
    added = console.post("/admin/channels", data={
        "csrf_token": csrf_of(listing), "kind": "discord", "name": "Community", "agent": "", "bot_token": TOKEN,
        "application_id": APPLICATION_ID, "public_key": PUBLIC_KEY})
    assert added.status_code == 303, added.text
    page = console.get(added.headers["location"]).text
    assert "<h1>Community</h1>" in page and "Interactions Endpoint URL" in page
    assert re.search(r'id="webhook-url">[^<]*/channels/discord/[0-9a-f]{12}/interactions<', page)
    assert f"••••{TOKEN[-4:]}" in page and TOKEN not in page and PUBLIC_KEY in page


def test_where_the_bot_may_not_open_a_thread_it_answers_in_the_channel(client, live, bot, fake_openai):
    _discord(client)
    _connected(bot)
    bot.recorder.fail("start thread", 403, description="Missing Permissions")
    bot.dispatch("MESSAGE_CREATE", discord_api.message("Open on Monday?", channel_id=CHANNEL_ID, guild_id=GUILD_ID,
                                                       mentions_bot=True))
    wait_until(lambda: bot.sent_texts() == ["echo: Open on Monday?"], 20, "the answer in the channel")
    assert bot.sent()[0]["_channel"] == CHANNEL_ID and bot.sent("start thread") == []

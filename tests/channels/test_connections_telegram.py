"""Telegram bots added through /api/connections: each its own webhook, secret and agent."""

from __future__ import annotations

import pytest
import redis
from pydantic import SecretStr

from tests.channels import vendors
from tests.channels.conftest import settle
from tests.channels.connections_support import ADMIN, SECRET_KEY, add, post_update, webhook_path


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY), "retrieval_strategy": "hybrid"}


def _webhook_secret(fake_telegram, token: str) -> str:
    username = fake_telegram.bots[token][1]
    [call] = [c for c in fake_telegram.recorder.received("setWebhook") if c.params["_bot"] == username]
    return call.params["secret_token"]


def _agent(client, name: str, kb: str) -> str:
    assert client.post("/api/kb/bases", json={"name": kb}, headers=ADMIN).status_code == 201
    prompt = f"You are the {name} desk; answer only about {name}.\n{{context_str}}\nQuestion: {{query_str}}"
    answer = client.post("/v1/agents", headers=ADMIN, json={"name": name, "config": {
        "knowledgeBases": [kb], "systemPrompt": prompt}})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def test_two_bots_answer_as_their_own_agents_with_their_own_knowledge(client, live, fake_telegram, fake_openai, stored):
    bikes, boats = _agent(client, "bikes", "bikes_kb"), _agent(client, "boats", "boats_kb")
    facts = {"bikes_kb": "E-bike rental costs 35 euros per day", "boats_kb": "Kayak rental costs 80 euros per day"}
    for kb, fact in facts.items():
        topic = {"source": kb + "-price", "title": "Rental prices", "summary": fact, "facts": [fact]}
        assert client.post(f"/api/kb/topics?kb={kb}", json=[topic], headers=ADMIN).status_code == 201
    bike_token, boat_token = fake_telegram.add_bot(7100001, "bikes_bot"), fake_telegram.add_bot(7100002, "boats_bot")
    bike = add(client, kind="telegram", name="Bikes", agent=bikes, credentials={"bot_token": bike_token})
    boat = add(client, kind="telegram", name="Boats", agent=boats, credentials={"bot_token": boat_token})
    assert bike["status"]["account"] == "@bikes_bot" and bike["agent"] == bikes
    assert bike["webhook_url"] == f"{vendors.PUBLIC_URL}/channels/telegram/{bike['id']}/webhook"
    assert bike["credentials"]["bot_token"] == "••••" + bike_token[-4:]
    [registered] = [c for c in fake_telegram.recorder.received("setWebhook") if c.params["_bot"] == "bikes_bot"]
    assert registered.params["url"] == bike["webhook_url"]

    question = "How much is a rental per day?"
    fake_openai.script_reply("Bikes: 35 euros.")
    assert post_update(client, bike, vendors.telegram_update(vendors.telegram_message(question)),
                       _webhook_secret(fake_telegram, bike_token)).status_code == 200
    settle(live)
    fake_openai.script_reply("Boats: 80 euros.")
    assert post_update(client, boat, vendors.telegram_update(vendors.telegram_message(question)),
                       _webhook_secret(fake_telegram, boat_token)).status_code == 200
    settle(live)

    prompts = [str(r["body"]["messages"]) for r in fake_openai.chat_requests()]
    assert len(prompts) == 2
    assert "35 euros" in prompts[0] and "80 euros" not in prompts[0]
    assert "80 euros" in prompts[1] and "35 euros" not in prompts[1]
    assert "You are the bikes desk" in prompts[0] and "boats desk" not in prompts[0]  # each agent's own prompt
    assert "You are the boats desk" in prompts[1] and "bikes desk" not in prompts[1]
    assert fake_telegram.sent_by("bikes_bot") == ["Bikes: 35 euros."]
    assert fake_telegram.sent_by("boats_bot") == ["Boats: 80 euros."]
    # the same Telegram user is a separate customer of each bot; each conversation records its connection
    bike_messages = stored.messages(f"telegram:{vendors.USER_ID}@{bike['id']}")
    assert [m.text for m in bike_messages] == [question, "Bikes: 35 euros."]
    [trace] = stored.traces(bike_messages[0])
    assert trace.connection == bike["id"] and trace.agent == bikes
    status = client.get(f"/api/connections/{bike['id']}", headers=ADMIN).json()["status"]
    assert status["last_inbound_at"] and status["last_outbound_at"] and status["last_error"] is None


def test_wrong_secret_and_disabled_or_deleted_connection(client, live, fake_telegram, fake_openai, stored):
    token = fake_telegram.add_bot(7100003, "shop_bot")
    bot = add(client, kind="telegram", name="Shop", credentials={"bot_token": token})
    secret = _webhook_secret(fake_telegram, token)
    update = vendors.telegram_update(vendors.telegram_message("hello"))
    assert post_update(client, bot, update, "wrong-secret").status_code == 401
    # the environment bot's secret does not open a connection's webhook, nor the reverse
    assert post_update(client, bot, update, vendors.TELEGRAM_SECRET).status_code == 401
    assert vendors.post_telegram(client, update, secret=secret).status_code == 401

    answer = client.patch(f"/api/connections/{bot['id']}", json={"enabled": False}, headers=ADMIN)
    assert answer.status_code == 200 and answer.json()["enabled"] is False
    refused = post_update(client, bot, update, secret)
    assert refused.status_code == 404 and refused.json()["error"] == "not_found"
    r = redis.Redis.from_url(live.services.settings.redis_url)
    assert r.xlen(live.services.inbox.stream) == 0
    settle(live)
    assert fake_openai.chat_requests() == [] and fake_telegram.sent_by("shop_bot") == []

    assert client.patch(f"/api/connections/{bot['id']}", json={"enabled": True}, headers=ADMIN).json()["enabled"]
    assert post_update(client, bot, update, secret).status_code == 200
    settle(live)
    assert fake_telegram.sent_by("shop_bot") == ["echo: hello"]

    assert client.delete(f"/api/connections/{bot['id']}", headers=ADMIN).status_code == 204
    assert [c.params["_bot"] for c in fake_telegram.recorder.received("deleteWebhook")] == ["shop_bot"]
    again = vendors.telegram_update(vendors.telegram_message("again"))
    assert post_update(client, bot, again, secret).status_code == 404
    assert client.get(f"/api/connections/{bot['id']}", headers=ADMIN).status_code == 404


def test_bad_token_is_refused_and_nothing_is_stored(client, live, fake_telegram, stored):
    answer = client.post("/api/connections", headers=ADMIN, json={
        "kind": "telegram", "name": "Typo", "credentials": {"bot_token": "123:not-a-real-token"}})
    assert answer.status_code == 422
    assert answer.json()["message"] == "credentials.bot_token: Telegram refused the token"
    assert stored.keys("connection*") == []


def test_unreachable_telegram_saves_the_connection_disabled(client, live, fake_telegram):
    token = fake_telegram.add_bot(7100004, "flaky_bot")
    fake_telegram.recorder.fail("getMe", 502)
    answer = client.post("/api/connections", headers=ADMIN, json={
        "kind": "telegram", "name": "Flaky", "credentials": {"bot_token": token}})
    assert answer.status_code == 201
    body = answer.json()
    assert body["enabled"] is False and "TelegramServerError" in body["status"]["last_error"]
    assert token not in answer.text
    again = client.post(f"/api/connections/{body['id']}/verify", headers=ADMIN).json()
    assert again["enabled"] is True and again["status"]["account"] == "@flaky_bot"
    assert again["status"]["last_error"] is None


def test_env_channels_are_the_read_only_default_connection(client, live):
    listed = client.get("/api/connections", headers=ADMIN).json()["connections"]
    defaults = {c["kind"]: c for c in listed if c["id"] == "default"}
    assert set(defaults) == {"telegram", "slack", "twilio_sms", "twilio_voice"}
    assert defaults["telegram"]["webhook_url"] == f"{vendors.PUBLIC_URL}/channels/telegram/webhook"
    assert defaults["telegram"]["read_only"] is True
    assert client.delete("/api/connections/default", headers=ADMIN).status_code == 409
    assert webhook_path(defaults["slack"]) == "/channels/slack/events"


def test_an_operator_takes_over_a_connection_chat_and_replies_through_that_bot(client, live, fake_telegram,
                                                                              fake_openai):
    token = fake_telegram.add_bot(7100005, "desk_bot")
    bot = add(client, kind="telegram", name="Desk", credentials={"bot_token": token})
    secret = _webhook_secret(fake_telegram, token)
    post_update(client, bot, vendors.telegram_update(vendors.telegram_message("what time do you open?")), secret)
    settle(live)
    [row] = client.get("/api/conversations?channel=telegram", headers=ADMIN).json()["conversations"]
    taken = client.post(f"/api/conversations/{row['id']}/take-over", json={"operator": "sam"}, headers=ADMIN)
    assert taken.json()["status"] == "human"
    post_update(client, bot, vendors.telegram_update(vendors.telegram_message("hello?")), secret)
    settle(live)
    assert len(fake_openai.chat_requests()) == 1  # handed off: the bot stays silent
    sent = client.post(f"/api/conversations/{row['id']}/reply", json={"operator": "sam", "text": "Sam here."},
                       headers=ADMIN)
    assert sent.json()["delivery"] == "delivered"
    assert fake_telegram.sent_by("desk_bot") == ["echo: what time do you open?", "Sam here."]
    assert fake_telegram.sent_by("switchboard_test_bot") == []  # not through the environment's bot


def test_a_new_token_moves_the_webhook_to_the_new_bot(client, live, fake_telegram, fake_openai):
    old, new = fake_telegram.add_bot(7100006, "old_bot"), fake_telegram.add_bot(7100007, "new_bot")
    bot = add(client, kind="telegram", name="Moving", credentials={"bot_token": old})
    secret = _webhook_secret(fake_telegram, old)
    changed = client.patch(f"/api/connections/{bot['id']}", json={"credentials": {"bot_token": new}}, headers=ADMIN)
    assert changed.status_code == 200 and changed.json()["status"]["account"] == "@new_bot"
    assert [c.params["_bot"] for c in fake_telegram.recorder.received("deleteWebhook")] == ["old_bot"]
    assert _webhook_secret(fake_telegram, new) == secret  # the connection keeps its webhook secret
    post_update(client, bot, vendors.telegram_update(vendors.telegram_message("who answers?")), secret)
    settle(live)
    assert fake_telegram.sent_by("new_bot") == ["echo: who answers?"] and fake_telegram.sent_by("old_bot") == []


def test_a_bots_photo_reaches_its_vision_agent_downloaded_with_its_own_token(client, live, fake_telegram,
                                                                             fake_openai, stored):
    from tests.fakes import media_files

    answer = client.post("/v1/agents", headers=ADMIN, json={"name": "parts", "config": {"vision": True}})
    assert answer.status_code == 201, answer.text
    token = fake_telegram.add_bot(7100003, "parts_bot")
    bot = add(client, kind="telegram", name="Parts", agent=answer.json()["id"], credentials={"bot_token": token})
    fake_telegram.files["part-photo"] = media_files.png(320, 200)
    photo = [{"file_id": "part-photo", "file_unique_id": "u-part", "width": 320, "height": 200}]
    update = vendors.telegram_update(vendors.telegram_message(photo=photo, caption="Which part is this?"))
    assert post_update(client, bot, update, _webhook_secret(fake_telegram, token)).status_code == 200
    settle(live)
    [got_file] = fake_telegram.recorder.received("getFile")
    assert got_file.params["_bot"] == "parts_bot"
    [image] = fake_openai.image_parts()
    assert image.startswith("data:image/jpeg;base64,")
    assert fake_telegram.sent_by("parts_bot") == ["echo: Which part is this? [image]"]

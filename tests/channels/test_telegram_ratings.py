"""👍 / 👎 under Telegram replies: the keyboard rides on the reply's own sendMessage, a press (a callback
query, through the inbox) records the vote on that reply as the web chat's are, is answered, and the
keyboard goes; a press on someone else's reply records nothing; a console-added bot does the same."""

from __future__ import annotations

import json

import pytest
from pydantic import SecretStr

from tests.channels import vendors
from tests.channels.conftest import settle, wait_until
from tests.channels.connections_support import ADMIN, SECRET_KEY, add, post_update

OTHER_CHAT = 515151


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY)}


def _insights(client) -> dict:
    answer = client.get("/api/insights", headers=ADMIN)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _buttons(sent: dict) -> list[tuple[str, str]]:
    return [(b["text"], b["callback_data"]) for row in sent["reply_markup"]["inline_keyboard"] for b in row]


def test_a_press_rates_the_reply_once_per_user_and_the_keyboard_goes(client, live, fake_telegram, fake_openai, stored):
    fake_openai.script_reply("We open at nine.")
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("When do you open?")))
    settle(live)
    [sent] = fake_telegram.sent
    [_, reply] = stored.messages(f"telegram:{vendors.USER_ID}")
    assert _buttons(sent) == [("👍", f"fb:up:{reply.id}"), ("👎", f"fb:down:{reply.id}")]
    assert len(fake_telegram.recorder.received("sendMessage")) == 1  # the keyboard cost no call of its own

    press = vendors.telegram_update(vendors.telegram_press(sent, f"fb:down:{reply.id}"), kind="callback_query")
    assert vendors.post_telegram(client, press).status_code == 200
    assert vendors.post_telegram(client, press).status_code == 200  # Telegram's retry: the same update_id
    wait_until(lambda: fake_telegram.recorder.received("editMessageReplyMarkup"), what="the keyboard removed")
    settle(live)
    [answered] = fake_telegram.recorder.received("answerCallbackQuery")
    assert answered.params["callback_query_id"] == press["callback_query"]["id"]
    assert answered.params["text"] == "Thanks for your feedback!"
    [edited] = fake_telegram.recorder.received("editMessageReplyMarkup")
    assert int(edited.params["message_id"]) == sent["message_id"] and "reply_markup" not in edited.params
    assert _insights(client)["feedback"] == {"up": 0, "down": 1, "comments": 0}

    # changed its mind (an old keyboard on another device): the vote is changed, not added
    again = vendors.telegram_update(vendors.telegram_press(sent, f"fb:up:{reply.id}"), kind="callback_query")
    vendors.post_telegram(client, again)
    wait_until(lambda: len(fake_telegram.recorder.received("answerCallbackQuery")) == 2, what="the second answer")
    settle(live)
    assert _insights(client)["feedback"] == {"up": 1, "down": 0, "comments": 0}
    votes = stored.redis.hgetall(stored.services.insight.feedback.key(reply.conversation_id))
    assert [(k.decode(), json.loads(v)["rating"]) for k, v in votes.items()] == [
        (f"{reply.id}|telegram:{vendors.USER_ID}", "up")]


def test_a_press_on_another_chats_reply_or_unknown_data_records_nothing(client, live, fake_telegram, fake_openai,
                                                                        stored):
    fake_openai.script_reply("Our address is 1 Main St.")
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("Where are you?")))
    settle(live)
    [sent] = fake_telegram.sent
    [_, reply] = stored.messages(f"telegram:{vendors.USER_ID}")
    # another chat's user forges a press naming this reply under a message of their own chat
    theirs = {**sent, "chat": {"id": OTHER_CHAT, "type": "private", "first_name": "Eve"}}
    for data in (f"fb:up:{reply.id}", "fb:up:0123456789abcdef0123456789abcdef", "zz:whatever"):
        press = vendors.telegram_press(theirs, data, user_id=OTHER_CHAT)
        vendors.post_telegram(client, vendors.telegram_update(press, kind="callback_query"))
    wait_until(lambda: len(fake_telegram.recorder.received("answerCallbackQuery")) == 3, what="three answers")
    settle(live)
    notices = [c.params["text"] for c in fake_telegram.recorder.received("answerCallbackQuery")]
    assert notices == ["This message can't be rated here.", "This message can't be rated here.",
                       "This button no longer does anything."]
    assert fake_telegram.recorder.received("editMessageReplyMarkup") == []
    assert _insights(client)["feedback"] == {"up": 0, "down": 0, "comments": 0}
    assert fake_telegram.sent_texts() == ["Our address is 1 Main St."]  # no turn for a press


def test_buttons_off_sends_plain_replies(client, live, fake_telegram, fake_openai):
    live.server.config.app.state.services.settings.feedback_buttons = False
    fake_openai.script_reply("Plain.")
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("hi")))
    settle(live)
    [sent] = fake_telegram.recorder.received("sendMessage")
    assert "reply_markup" not in sent.params


def test_a_console_added_bot_rates_its_own_replies(client, live, fake_telegram, fake_openai):
    token = fake_telegram.add_bot(7200001, "ratings_bot")
    bot = add(client, kind="telegram", name="Ratings", credentials={"bot_token": token})
    [hook] = [c for c in fake_telegram.recorder.received("setWebhook") if c.params["_bot"] == "ratings_bot"]
    assert "callback_query" in json.loads(hook.params["allowed_updates"])
    secret = hook.params["secret_token"]
    fake_openai.script_reply("Connection reply.")
    post_update(client, bot, vendors.telegram_update(vendors.telegram_message("hello bot")), secret)
    settle(live)
    [sent] = fake_telegram.sent
    [(_, up), _] = _buttons(sent)
    post_update(client, bot, vendors.telegram_update(vendors.telegram_press(sent, up), kind="callback_query"), secret)
    wait_until(lambda: fake_telegram.recorder.received("editMessageReplyMarkup"), what="the keyboard removed")
    [answered] = fake_telegram.recorder.received("answerCallbackQuery")
    assert answered.params["_bot"] == "ratings_bot" and answered.params["text"] == "Thanks for your feedback!"
    report = _insights(client)
    assert report["feedback"]["up"] == 1

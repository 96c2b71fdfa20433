"""Telegram specifics: HTML, groups, /start, non-text messages, typing, secrets never stored, polling."""

from __future__ import annotations

import json
import time

import pytest

from gateway.core.models import Role
from tests.channels import vendors
from tests.channels.conftest import settle, wait_until
from tests.fakes import telegram_api

GROUP_ID = -1001234567890


def test_reply_is_html_escaped_and_markdown_converted(client, live, fake_telegram, fake_openai):
    fake_openai.script_reply("Use **bold** & `a<b>` — see [docs](https://example.com/a?b=1&c=2)")
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("format please")))
    settle(live)
    [sent] = fake_telegram.recorder.received("sendMessage")
    assert sent.params["parse_mode"] == "HTML"
    assert sent.params["text"] == (
        'Use <b>bold</b> &amp; <code>a&lt;b&gt;</code> — see '
        '<a href="https://example.com/a?b=1&amp;c=2">docs</a>'
    )
    assert int(sent.params["chat_id"]) == vendors.USER_ID


def test_html_telegram_cannot_parse_is_resent_as_plain_text(client, live, fake_telegram, fake_openai, stored):
    fake_telegram.recorder.fail("sendMessage", 400, description='Bad Request: can\'t parse entities: '
                                'Unsupported start tag "b" at byte offset 4')
    fake_openai.script_reply("Our **spring** sale: see [the list](https://example.com/sale?a=1&b=2) & more")
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("any sale?")))
    settle(live)
    refused, resent = fake_telegram.recorder.received("sendMessage", ok_only=False)
    assert refused.status == 400 and refused.params["parse_mode"] == "HTML"
    assert resent.status == 200 and "parse_mode" not in resent.params
    assert resent.params["text"] == "Our spring sale: see the list (https://example.com/sale?a=1&b=2) & more"
    [_, agent] = stored.messages(f"telegram:{vendors.USER_ID}")
    assert agent.role is Role.AGENT and agent.delivery.value == "delivered"


def test_limit_applies_after_escaping(client, live, fake_telegram, fake_openai):
    fake_openai.script_reply("<&> " * 1500)  # 6,000 raw characters, 21,000 once escaped
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("escape me")))
    settle(live)
    texts = fake_telegram.sent_texts()
    assert len(texts) >= 6 and all(len(t) <= 4096 for t in texts)
    assert texts[0].startswith(f"(1/{len(texts)}) &lt;&amp;&gt; ")


def test_typing_action_is_sent_while_the_reply_is_prepared(client, live, fake_telegram, fake_openai):
    fake_openai.script_reply("done", delay_s=0.5)
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("slow one")))
    settle(live)
    calls = [c.method for c in fake_telegram.recorder.calls if c.method in ("sendChatAction", "sendMessage")]
    assert calls[0] == "sendChatAction" and calls[-1] == "sendMessage"
    action = fake_telegram.recorder.received("sendChatAction")[0]
    assert action.params["action"] == "typing"


@pytest.mark.parametrize("kind, payload", [  # photos, voice notes, documents: tests/channels/test_media_telegram.py
    ("sticker", {"sticker": {"file_id": "CAAD-st", "file_unique_id": "s1", "type": "regular", "width": 512,
                             "height": 512, "is_animated": False, "is_video": False, "emoji": "👍"}}),
    ("location", {"location": {"latitude": 52.52, "longitude": 13.405}}),
])
def test_non_text_messages_get_a_clear_answer_and_no_turn(kind, payload, client, live, fake_telegram, fake_openai,
                                                          stored):
    update = vendors.telegram_update(vendors.telegram_message(**payload))
    assert vendors.post_telegram(client, update).status_code == 200
    vendors.post_telegram(client, update)  # redelivered: still one answer
    settle(live)
    assert fake_telegram.sent_texts() == [live.services.settings.channel_unsupported_message]
    assert fake_openai.chat_requests() == []
    assert stored.keys("msg:*") == []


def test_caption_counts_as_text_and_file_urls_with_the_token_are_never_stored(client, live, fake_telegram, stored):
    photo = [{"file_id": "AgAD-large", "file_unique_id": "u2", "width": 800, "height": 800, "file_size": 1234}]
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message(photo=photo,
                                                                                 caption="Is this model in stock?")))
    settle(live)
    assert fake_telegram.sent_texts()[0].startswith("echo: Is this model in stock?")  # the photo: test_media_telegram
    everything = stored.all_values()
    assert "Is this model in stock?" in everything
    assert telegram_api.TOKEN not in everything and telegram_api.TOKEN.split(":")[1] not in everything


def test_group_messages_only_when_mentioned_or_replied_to(client, live, fake_telegram, fake_openai, stored):
    mention = f"@{telegram_api.BOT_USERNAME}"
    chatter = vendors.telegram_message("lunch anyone?", chat_id=GROUP_ID, chat_type="supergroup")
    mentioned = vendors.telegram_message(f"{mention} what are your hours?", chat_id=GROUP_ID, chat_type="supergroup",
                                         entities=[{"type": "mention", "offset": 0, "length": len(mention)}])
    bot_msg = {"message_id": 5, "date": int(time.time()), "chat": {"id": GROUP_ID, "type": "supergroup"},
               "from": {"id": telegram_api.BOT_ID, "is_bot": True, "first_name": "Switchboard"}, "text": "Hi"}
    reply = vendors.telegram_message("and on Sundays?", chat_id=GROUP_ID, chat_type="supergroup",
                                     reply_to_message=bot_msg)
    for msg in (chatter, mentioned, reply):
        assert vendors.post_telegram(client, vendors.telegram_update(msg)).status_code == 200
        settle(live)
    assert fake_telegram.sent_texts(GROUP_ID) == ["echo: what are your hours?", "echo: and on Sundays?"]
    sent = fake_telegram.recorder.received("sendMessage")
    assert json.loads(sent[0].params["reply_parameters"])["message_id"] == mentioned["message_id"]
    users = [m.text for m in stored.messages(f"telegram:{vendors.USER_ID}") if m.role == Role.USER]
    assert users == ["what are your hours?", "and on Sundays?"]


def test_forum_topic_replies_go_to_the_topic(client, live, fake_telegram):
    msg = vendors.telegram_message("/help@other_bot hello", chat_id=GROUP_ID, chat_type="supergroup")
    msg.update(message_thread_id=77, is_topic_message=True,
               reply_to_message={"message_id": 9, "date": int(time.time()),
                                 "chat": {"id": GROUP_ID, "type": "supergroup"},
                                 "from": {"id": telegram_api.BOT_ID, "is_bot": True, "first_name": "S"},
                                 "text": "earlier"})
    vendors.post_telegram(client, vendors.telegram_update(msg))
    settle(live)
    [sent] = fake_telegram.recorder.received("sendMessage")
    assert sent.params["message_thread_id"] == "77" and int(sent.params["chat_id"]) == GROUP_ID


def test_start_greets_and_begins_a_new_conversation(client, live, fake_telegram, stored):
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("hello")))
    settle(live)
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("/start")))
    settle(live)
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("again")))
    settle(live)
    assert fake_telegram.sent_texts() == ["echo: hello", live.services.settings.channel_welcome_message,
                                          "echo: again"]
    users = [m for m in stored.messages(f"telegram:{vendors.USER_ID}") if m.role == Role.USER]
    assert [m.text for m in users] == ["hello", "again"]
    assert users[0].conversation_id != users[1].conversation_id


def test_edits_and_bot_senders_are_ignored(client, live, fake_telegram, fake_openai):
    edited = vendors.telegram_update(vendors.telegram_message("edited text"), kind="edited_message")
    bot = vendors.telegram_message("from a bot")
    bot["from"]["is_bot"] = True
    for update in (edited, vendors.telegram_update(bot)):
        assert vendors.post_telegram(client, update).status_code == 200
    time.sleep(0.3)
    settle(live)
    assert fake_telegram.sent_texts() == [] and fake_openai.chat_requests() == []


def test_missing_secret_header_is_refused(client, stored):
    resp = vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("hi")), secret=None)
    assert resp.status_code == 401 and stored.keys("msg:*") == []


@pytest.fixture
def polling(channel_overrides):
    channel_overrides["telegram_mode"] = "polling"


def test_polling_mode_reads_updates_and_replies(polling, live, fake_telegram):
    fake_telegram.push_update(vendors.telegram_update(vendors.telegram_message("via polling")))
    wait_until(lambda: fake_telegram.sent_texts(), what="a reply to the polled update")
    assert fake_telegram.sent_texts() == ["echo: via polling"]
    assert fake_telegram.recorder.received("deleteWebhook")


@pytest.fixture
def registering(channel_overrides):
    channel_overrides["telegram_register_webhook"] = True


def test_webhook_registration_retries_a_429_and_sends_the_secret(registering, fake_telegram, channel_settings):
    from gateway.http.app import create_app
    from tests.fakes.live_server import LiveServer

    fake_telegram.recorder.fail("setWebhook", 429, retry_after=1)
    with LiveServer(create_app(channel_settings)):
        calls = fake_telegram.recorder.received("setWebhook", ok_only=False)
    assert [c.status for c in calls] == [429, 200]
    assert calls[1].params["url"] == vendors.PUBLIC_URL + "/channels/telegram/webhook"
    assert calls[1].params["secret_token"] == vendors.TELEGRAM_SECRET

"""WhatsApp Cloud API, Messenger and Instagram connections, against a fake Graph API, signed as Meta signs."""

from __future__ import annotations

import time

import pytest
from pydantic import SecretStr

from channels.media_answer import MEDIA_REPLY
from gateway.core.models import Role
from tests.channels import vendors
from tests.channels.conftest import settle
from tests.channels.connections_support import ADMIN, SECRET_KEY, add, add_desk_agent, queued_keys, webhook_path

WA_TOKEN = "EAAG-whatsapp-cloud-token-0001"
PAGE_TOKEN = "EAAG-messenger-page-token-0002"
IG_TOKEN = "EAAG-instagram-page-token-0003"
CUSTOMER = f"whatsapp:+{vendors.WA_CUSTOMER}"


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY)}


@pytest.fixture
def meta_accounts(fake_meta):
    fake_meta.add_account(vendors.WA_PHONE_NUMBER_ID, WA_TOKEN, "whatsapp", verified_name="Bike Shop",
                          display_phone_number="+1 555-078-3881")
    fake_meta.add_account(vendors.PAGE_ID, PAGE_TOKEN, "page", name="Bike Shop Page")
    fake_meta.add_account(vendors.IG_USER_ID, IG_TOKEN, "instagram", username="bikeshop", name="Bike Shop")
    return fake_meta


def _whatsapp(client, **extra) -> dict:
    return add(client, kind="whatsapp_cloud", name="WhatsApp", credentials={
        "access_token": WA_TOKEN, "phone_number_id": vendors.WA_PHONE_NUMBER_ID, "app_secret": vendors.META_APP_SECRET,
        **extra.pop("credentials", {})}, **extra)


def test_whatsapp_cloud_answers_each_message_of_a_delivery_once_as_the_connections_agent(
        client, live, meta_accounts, fake_openai, stored):
    bikes = add_desk_agent(client, "bikes")
    wa = _whatsapp(client, agent=bikes)
    path = webhook_path(wa)
    assert path == f"/channels/meta/{wa['id']}/whatsapp"
    assert wa["status"]["account"] == "Bike Shop (+1 555-078-3881)" and wa["enabled"]
    assert wa["credentials"]["access_token"] == "••••" + WA_TOKEN[-4:]
    assert wa["credentials"]["app_secret"] == "••••" + vendors.META_APP_SECRET[-4:]
    assert len(wa["verify_token"]) >= 24 and wa["credentials"]["verify_token"] == wa["verify_token"]
    [check] = meta_accounts.sent("account")
    assert check["_path"] == vendors.WA_PHONE_NUMBER_ID

    # Meta's subscription check, with and without this connection's verify token
    hub = {"hub.mode": "subscribe", "hub.challenge": "1158201444", "hub.verify_token": wa["verify_token"]}
    answer = client.get(path, params=hub)
    assert answer.status_code == 200 and answer.text == "1158201444"
    assert client.get(path, params={**hub, "hub.verify_token": "not-it"}).status_code == 403

    texts = ["Do you rent e-bikes?", "How much per day?", "Can I book for Sunday?"]
    delivery = vendors.whatsapp_delivery(*[vendors.whatsapp_text(t) for t in texts])
    before = queued_keys(stored)
    assert vendors.post_meta(client, path, delivery, secret=None).status_code == 401
    assert vendors.post_meta(client, path, delivery, secret="not-the-app-secret").status_code == 401
    time.sleep(0.2)
    assert queued_keys(stored) == before and fake_openai.chat_requests() == []

    assert vendors.post_meta(client, path, delivery).status_code == 200
    settle(live)
    assert vendors.post_meta(client, path, delivery).status_code == 200  # Meta delivers it again
    settle(live)
    assert meta_accounts.sent_texts(vendors.WA_CUSTOMER) == [f"echo: {t}" for t in texts]
    assert all(p["_path"] == f"{vendors.WA_PHONE_NUMBER_ID}/messages" and p["messaging_product"] == "whatsapp"
               for p in meta_accounts.sent())
    prompts = [str(r["body"]["messages"]) for r in fake_openai.chat_requests()]
    assert len(prompts) == 3 and all("You are the bikes desk" in p for p in prompts)
    messages = stored.messages(f"{CUSTOMER}@{wa['id']}")
    assert [m.text for m in messages if m.role.value == "user"] == texts  # three turns, in the customer's order
    assert [m.text for m in messages if m.role.value == "agent"] == [f"echo: {t}" for t in texts]
    assert messages[0].channel == "whatsapp_cloud"
    trace = stored.traces(messages[0])[0]
    assert trace.connection == wa["id"] and trace.agent == bikes
    # read receipt with typing indicator on each customer message while the model thinks
    typed = {p["message_id"] for p in meta_accounts.sent("typing")}
    assert typed == {m["id"] for m in delivery["entry"][0]["changes"][0]["value"]["messages"]}


def test_a_long_whatsapp_reply_is_split_at_4096_characters(client, live, meta_accounts, fake_openai):
    wa = _whatsapp(client)
    fake_openai.script_reply("Long answer. " * 400)  # 5,200 characters
    assert vendors.post_meta(client, webhook_path(wa), vendors.whatsapp_delivery(
        vendors.whatsapp_text("Tell me everything"))).status_code == 200
    settle(live)
    sent = meta_accounts.sent_texts(vendors.WA_CUSTOMER)
    assert len(sent) == 2 and all(len(part) <= 4096 for part in sent)


def test_whatsapp_media_is_recorded_described_and_answered_without_the_model(client, live, meta_accounts,
                                                                             fake_openai, stored):
    wa = _whatsapp(client)
    photo = {"from": vendors.WA_CUSTOMER, "id": "wamid.PHOTO0001", "timestamp": "1749416383", "type": "image",
             "image": {"mime_type": "image/jpeg", "sha256": "abc", "id": "1003383421387256"}}
    place = {"from": vendors.WA_CUSTOMER, "id": "wamid.PLACE0001", "timestamp": "1749416384", "type": "location",
             "location": {"latitude": 52.52, "longitude": 13.405, "name": "Shop", "address": "Main St 1"}}
    card = {"from": vendors.WA_CUSTOMER, "id": "wamid.CARD0001", "timestamp": "1749416385", "type": "contacts",
            "contacts": [{"name": {"formatted_name": "Ada Lovelace", "first_name": "Ada"},
                          "phones": [{"phone": "+1 555 0100", "type": "CELL"}]}]}
    voice = {"from": vendors.WA_CUSTOMER, "id": "wamid.VOICE0001", "timestamp": "1749416386", "type": "audio",
             "audio": {"mime_type": "audio/ogg; codecs=opus", "sha256": "def", "id": "2003", "voice": True}}
    invoice = {"from": vendors.WA_CUSTOMER, "id": "wamid.DOC0001", "timestamp": "1749416387", "type": "document",
               "document": {"filename": "invoice.pdf", "mime_type": "application/pdf", "sha256": "0", "id": "3003"}}
    sticker = {"from": vendors.WA_CUSTOMER, "id": "wamid.STICKER0001", "timestamp": "1749416388", "type": "sticker",
               "sticker": {"mime_type": "image/webp", "sha256": "1", "id": "4003", "animated": False}}
    delivery = vendors.whatsapp_delivery(photo, place, card, voice, invoice, sticker)
    assert vendors.post_meta(client, webhook_path(wa), delivery).status_code == 200
    settle(live)
    transcript = stored.messages(f"{CUSTOMER}@{wa['id']}")
    # each answered (a reply's time is its send's, so under load a later item's receipt may sort before it)
    # the photo, voice note and invoice go to the media service (test_media_meta.py): this agent cannot see,
    # and the fake Graph has no such media, so each gets its polite answer without the model
    assert [m.text for m in transcript if m.role is Role.USER] == [
        "[a photo]", "[a location: 52.52, 13.405 — Shop, Main St 1]", "[a contact card: Ada Lovelace]",
        "[a voice note]", "[a document 'invoice.pdf']", "[a sticker (image/webp)]"]
    unreadable = "Sorry, I could not read that file. Please try again, or type your question."
    answers = ["I can't see photos, sorry: please describe what it shows in words.", MEDIA_REPLY, MEDIA_REPLY,
               unreadable, unreadable, MEDIA_REPLY]
    assert sorted(m.text for m in transcript if m.role is Role.AGENT) == sorted(answers)
    assert "+1 555 0100" not in stored.all_values()  # a third party's number is not kept
    assert fake_openai.chat_requests() == []
    assert sorted(meta_accounts.sent_texts(vendors.WA_CUSTOMER)) == sorted(answers)


def test_outside_the_24_hour_window_the_refusal_is_recorded_in_the_trace_and_the_console(
        client, live, meta_accounts, fake_openai, stored):
    wa = _whatsapp(client)
    meta_accounts.outside_window.add(vendors.WA_CUSTOMER)
    assert vendors.post_meta(client, webhook_path(wa), vendors.whatsapp_delivery(
        vendors.whatsapp_text("Still there?"))).status_code == 200
    settle(live)
    question, reply = stored.messages(f"{CUSTOMER}@{wa['id']}")
    assert reply.text == "echo: Still there?" and reply.delivery.value == "failed"
    assert "24-hour" in reply.delivery_error and "131047" in reply.delivery_error
    [trace] = stored.traces(question)
    assert trace.delivery_error == reply.delivery_error
    status = client.get(f"/api/connections/{wa['id']}", headers=ADMIN).json()["status"]
    assert status["waiting_for_template"] == 1 and "131047" in status["last_error"]


def test_statuses_mark_the_reply_and_a_later_refusal_reaches_its_trace(client, live, meta_accounts, fake_openai,
                                                                       stored):
    wa = _whatsapp(client)
    path = webhook_path(wa)
    assert vendors.post_meta(client, path, vendors.whatsapp_delivery(vendors.whatsapp_text("Hi"))).status_code == 200
    settle(live)
    [sent_id] = [k.rsplit(":", 1)[1] for k in stored.keys("whatsapp_cloud:sent:*")]
    assert sent_id.startswith("wamid.FAKE")
    delivered = vendors.whatsapp_delivery(statuses=(vendors.whatsapp_status(sent_id, "delivered"),))
    assert vendors.post_meta(client, path, delivered).status_code == 200
    question, reply = stored.messages(f"{CUSTOMER}@{wa['id']}")
    assert reply.delivery.value == "delivered" and reply.delivery_error is None
    refusal = {"code": 131047, "title": "Re-engagement message", "message": "Re-engagement message",
               "error_data": {"details": "Message failed to send because more than 24 hours have passed since "
                                         "the customer last replied to this number."}}
    failed = vendors.whatsapp_delivery(statuses=(vendors.whatsapp_status(sent_id, "failed", errors=[refusal]),))
    assert vendors.post_meta(client, path, failed, secret="another-apps-secret").status_code == 401
    assert stored.messages(f"{CUSTOMER}@{wa['id']}")[1].delivery.value == "delivered"
    assert vendors.post_meta(client, path, failed).status_code == 200
    question, reply = stored.messages(f"{CUSTOMER}@{wa['id']}")
    assert reply.delivery.value == "failed" and "waiting for a template" in reply.delivery_error
    [trace] = stored.traces(question)
    assert "131047" in trace.delivery_error
    assert client.get(f"/api/connections/{wa['id']}", headers=ADMIN).json()["status"]["waiting_for_template"] == 1


def test_a_refused_token_is_a_422_with_metas_message_and_stores_nothing(client, live, meta_accounts, stored):
    answer = client.post("/api/connections", headers=ADMIN, json={
        "kind": "whatsapp_cloud", "name": "x", "credentials": {
        "access_token": "EAAG-revoked-token", "phone_number_id": vendors.WA_PHONE_NUMBER_ID,
        "app_secret": vendors.META_APP_SECRET}})
    assert answer.status_code == 422
    assert answer.json()["message"].startswith("credentials.access_token: Meta refused")
    assert "Invalid OAuth access token" in answer.json()["message"]
    assert stored.keys("connection*") == []


def test_a_verify_token_given_is_kept_and_unknown_credentials_are_refused(client, live, meta_accounts):
    wa = _whatsapp(client, credentials={"verify_token": "my-own-verify-token", "waba_id": vendors.WA_BUSINESS_ACCOUNT})
    assert wa["verify_token"] == "my-own-verify-token"
    answer = client.post("/api/connections", headers=ADMIN, json={"kind": "messenger", "name": "x", "credentials": {
        "page_access_token": PAGE_TOKEN, "page_id": vendors.PAGE_ID, "app_secret": "s" * 20, "waba_id": "1"}})
    assert answer.status_code == 422 and answer.json()["message"].startswith("credentials.waba_id: not a messenger")


def test_a_delivery_for_another_number_of_the_same_app_is_not_answered_from_this_one(client, live, meta_accounts,
                                                                                      fake_openai, stored):
    wa = _whatsapp(client)
    other = vendors.whatsapp_delivery(vendors.whatsapp_text("Hello other shop"), phone_number_id="999999999999999")
    assert vendors.post_meta(client, webhook_path(wa), other).status_code == 200
    settle(live)
    assert stored.keys("msg:*") == [] and meta_accounts.sent() == [] and fake_openai.chat_requests() == []


@pytest.mark.parametrize("kind", ["messenger", "instagram"])
def test_messenger_and_instagram_answer_each_message_once_as_the_connections_agent(kind, client, live, meta_accounts,
                                                                                   fake_openai, stored):
    desk = add_desk_agent(client, f"{kind}-desk")
    token, account, token_field, id_field, limit = {
        "messenger": (PAGE_TOKEN, vendors.PAGE_ID, "page_access_token", "page_id", 2000),
        "instagram": (IG_TOKEN, vendors.IG_USER_ID, "access_token", "ig_user_id", 1000)}[kind]
    connection = add(client, kind=kind, name=kind.title(), agent=desk, credentials={
        token_field: token, id_field: account, "app_secret": vendors.META_APP_SECRET})
    assert connection["status"]["account"] == ("Bike Shop Page" if kind == "messenger" else "@bikeshop")
    path = webhook_path(connection)
    assert path == f"/channels/meta/{connection['id']}/{kind}"
    hub = {"hub.mode": "subscribe", "hub.challenge": "424242", "hub.verify_token": connection["verify_token"]}
    assert client.get(path, params=hub).text == "424242"

    obj = "page" if kind == "messenger" else "instagram"
    texts = ["Do you rent e-bikes?", "How much per day?", "Can I book for Sunday?"]
    events = [vendors.messaging_text(t, recipient=account) for t in texts]
    echo = {**vendors.messaging_text("an earlier reply of ours", recipient=vendors.PSID, sender=account)}
    echo["message"]["is_echo"] = True
    delivery = vendors.messaging_delivery(*events, echo, obj=obj, account=account)
    assert vendors.post_meta(client, path, delivery, secret="wrong").status_code == 401
    assert stored.keys("msg:*") == []
    assert vendors.post_meta(client, path, delivery).status_code == 200
    settle(live)
    assert vendors.post_meta(client, path, delivery).status_code == 200  # delivered again
    settle(live)
    assert meta_accounts.sent_texts(vendors.PSID) == [f"echo: {t}" for t in texts]
    assert all(p["_path"] == "me/messages" and p["messaging_type"] == "RESPONSE" for p in meta_accounts.sent())
    assert {p["sender_action"] for p in meta_accounts.sent("typing")} == {"typing_on"}
    prompts = [str(r["body"]["messages"]) for r in fake_openai.chat_requests()]
    assert len(prompts) == 3 and all(f"You are the {kind}-desk desk" in p for p in prompts)
    messages = stored.messages(f"{kind}:{vendors.PSID}@{connection['id']}")
    assert [m.text for m in messages if m.role.value == "user"] == texts
    assert [m.text for m in messages if m.role.value == "agent"] == [f"echo: {t}" for t in texts]
    assert stored.traces(messages[0])[0].agent == desk

    fake_openai.script_reply("Long answer. " * 200)  # 2,600 characters
    assert vendors.post_meta(client, path, vendors.messaging_delivery(
        vendors.messaging_text("Tell me everything", recipient=account), obj=obj, account=account)).status_code == 200
    settle(live)
    parts = meta_accounts.sent_texts(vendors.PSID)[3:]
    assert len(parts) == {"messenger": 2, "instagram": 3}[kind]
    assert all(len(p) <= limit for p in parts)

    photo = vendors.messaging_text("", recipient=account)
    photo["message"] = {"mid": "m_photo_1", "attachments": [
        {"type": "image", "payload": {"url": "https://scontent.xx.fbcdn.net/v/t1.15752-9/photo.jpg?oh=secret"}}]}
    photo_delivery = vendors.messaging_delivery(photo, obj=obj, account=account)
    assert vendors.post_meta(client, path, photo_delivery).status_code == 200
    settle(live)
    transcript = [m.text for m in stored.messages(f"{kind}:{vendors.PSID}@{connection['id']}")]
    assert transcript[-2:] == ["[a photo]", MEDIA_REPLY]
    assert "fbcdn" not in stored.all_values()  # the attachment's signed CDN URL is not kept


"""Handoff from the console over real channels: take over a Telegram chat, reply through Telegram,
hand back; web chat gets the operator's reply in its transcript; a phone call says it cannot be
taken over; the list filters "waiting for an operator"; CSRF is required."""

from __future__ import annotations

import re

import httpx
import pytest
from pydantic import SecretStr

from gateway.core.models import Role
from tests.admin_ui.conftest import PASSWORD, csrf_of, sign_in
from tests.channels import vendors
from tests.channels.conftest import settle, wait_until


@pytest.fixture
def channel_overrides() -> dict:
    return {"admin_password": SecretStr(PASSWORD), "admin_user": "root"}


@pytest.fixture
def console(live):
    """A signed-in console client. The channels' public URL is https, so the console's cookies are
    ``Secure``: carried by hand here, as a browser would over https."""
    jar: dict[str, str] = {}

    def keep(response: httpx.Response) -> None:
        for header in response.headers.get_list("set-cookie"):
            name, _, rest = header.partition("=")
            jar[name] = rest.split(";", 1)[0]

    def send(request: httpx.Request) -> None:
        if jar:
            request.headers["cookie"] = "; ".join(f"{k}={v}" for k, v in jar.items())

    with httpx.Client(base_url=live.url, timeout=10, event_hooks={"request": [send], "response": [keep]}) as c:
        assert sign_in(c).status_code == 303
        yield c


def act(console: httpx.Client, conversation_id: str, action: str, **form) -> httpx.Response:
    page = console.get(f"/admin/conversations/{conversation_id}")
    return console.post(f"/admin/conversations/{conversation_id}/{action}",
                        data={"csrf_token": csrf_of(page.text), **form})


def test_take_over_a_telegram_chat_reply_through_telegram_and_hand_back(client, live, console, fake_telegram,
                                                                         fake_openai, stored):
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("hello")))
    settle(live)
    identity = f"telegram:{vendors.USER_ID}"
    conversation_id = stored.messages(identity)[0].conversation_id
    listing = console.get("/admin/conversations").text
    assert f'/admin/conversations/{conversation_id}"' in listing and "echo: hello" in listing

    page = console.get(f"/admin/conversations/{conversation_id}").text
    assert "Turn trace" in page and "Take over" in page and "llm" in page
    refused = console.post(f"/admin/conversations/{conversation_id}/take-over", data={})
    assert refused.status_code == 403 and live.services.handoffs is not None
    assert act(console, conversation_id, "take-over").status_code == 303

    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("anyone there?")))
    settle(live)
    assert fake_telegram.sent_texts() == ["echo: hello"]  # the bot stayed silent
    assert "anyone there?" in console.get(f"/admin/conversations/{conversation_id}?fragment=transcript").text

    empty = act(console, conversation_id, "reply", reply="   ")
    assert empty.status_code == 422 and "type a message first" in empty.text
    assert act(console, conversation_id, "reply", reply="Hi, this is Ann from support.").status_code == 303
    [_, sent] = fake_telegram.recorder.received("sendMessage")
    assert sent.params["text"] == "Hi, this is Ann from support."
    assert int(sent.params["chat_id"]) == vendors.USER_ID
    operator = [m for m in stored.messages(identity) if m.role is Role.OPERATOR]
    assert [(m.text, m.delivery.value) for m in operator] == [("Hi, this is Ann from support.", "delivered")]

    assert act(console, conversation_id, "hand-back").status_code == 303
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("thanks")))
    settle(live)
    assert fake_telegram.sent_texts()[-1] == "echo: thanks"
    prompt = fake_openai.chat_requests()[-1]["body"]["messages"]
    assert {"role": "assistant", "content": "Hi, this is Ann from support."} in prompt
    transcript = console.get(f"/admin/conversations/{conversation_id}?fragment=transcript").text
    assert "root took over the conversation" in transcript and "root handed the conversation back" in transcript


def test_web_chat_is_silent_while_handed_off_and_shows_the_operator_reply(client, live, console):
    session = client.post("/api/chat/sessions").json()
    auth = {"Authorization": f"Bearer {session['token']}"}
    path = f"/api/chat/sessions/{session['session_id']}/messages"
    first = client.post(path, json={"text": "hi"}, headers=auth).json()
    listing = console.get("/admin/conversations?channel=webchat").text
    conversation_id = re.search(r'/admin/conversations/([0-9a-f]{32})"', listing).group(1)
    assert first["reply"]["text"] == "echo: hi"

    assert act(console, conversation_id, "take-over").status_code == 303
    quiet = client.post(path, json={"text": "hello?"}, headers=auth).json()
    assert quiet["reply"] is None and quiet["handed_off"] is True
    assert act(console, conversation_id, "reply", reply="A person here.").status_code == 303
    transcript = client.get(path, headers=auth).json()["messages"]
    assert [(m["role"], m["text"]) for m in transcript] == [
        ("user", "hi"), ("agent", "echo: hi"), ("notice", "Root joined the conversation"), ("user", "hello?"),
        ("operator", "A person here.")]
    assert transcript[-1]["author"] == "Root"  # the operator's name, as the visitor sees it


def test_asking_for_a_person_lists_the_chat_as_waiting(client, live, console, fake_telegram):
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("I want to speak to a person")))
    settle(live)
    assert fake_telegram.sent_texts() == [live.services.settings.handoff_message]
    waiting = console.get("/admin/conversations?status=waiting").text
    bot = console.get("/admin/conversations?status=bot").text
    assert "Waiting for an operator" in waiting and "speak to a person" not in bot
    wait_until(lambda: "I want to speak to a person" not in console.get("/admin/conversations?status=bot").text)


def test_a_phone_call_cannot_be_taken_over_mid_call(client, live, console):
    sid = "CA" + "1" * 32
    assert vendors.post_twilio(client, "/channels/twilio/voice", vendors.call_params(sid)).status_code == 200
    turn = vendors.post_twilio(client, "/channels/twilio/voice/turn?n=1",
                               vendors.call_params(sid, SpeechResult="what time do you open"))
    assert turn.status_code == 200
    settle(live)
    listing = console.get("/admin/conversations?channel=twilio_voice").text
    conversation_id = re.search(r'/admin/conversations/([0-9a-f]{32})"', listing).group(1)
    page = console.get(f"/admin/conversations/{conversation_id}").text
    assert "cannot be taken over mid-call" in page and "Take over</button>" not in page
    refused = act(console, conversation_id, "take-over")
    assert refused.status_code == 422 and "cannot be taken over mid-call" in refused.text
    assert live.services.handoffs is not None


def test_the_admin_api_lists_takes_over_replies_by_sms_and_hands_back(client, live, fake_twilio):
    admin = {"Authorization": "Bearer admin-secret"}
    vendors.post_twilio(client, "/channels/twilio/sms", vendors.sms_params("do you rent tandems?"))
    settle(live)
    listed = client.get("/api/conversations?channel=twilio_sms", headers=admin).json()["conversations"]
    [row] = listed
    assert row["status"] == "bot" and row["last_message"]["text"] == "echo: do you rent tandems?"
    conversation_id = row["id"]
    assert client.get("/api/conversations?channel=twilio_sms&q=TANDEMS", headers=admin).json()["conversations"]
    assert not client.get("/api/conversations?channel=twilio_sms&q=unicycle", headers=admin).json()["conversations"]

    taken = client.post(f"/api/conversations/{conversation_id}/take-over", json={"operator": "sam"}, headers=admin)
    assert taken.json() == {"conversation_id": conversation_id, "status": "human", "operator": "sam"}
    other = client.post(f"/api/conversations/{conversation_id}/reply", json={"operator": "kim", "text": "hi"},
                        headers=admin)
    assert other.status_code == 409 and "sam has taken over" in other.json()["message"]
    sent = client.post(f"/api/conversations/{conversation_id}/reply",
                       json={"operator": "sam", "text": "Yes, tandems are 50 euros a day."}, headers=admin)
    assert sent.json()["role"] == "operator" and sent.json()["delivery"] == "delivered"
    assert fake_twilio.sent_texts(to=vendors.CALLER)[-1] == "Yes, tandems are 50 euros a day."
    waiting = client.get("/api/conversations?status=human", headers=admin).json()["conversations"]
    assert [(c["id"], c["operator"]) for c in waiting] == [(conversation_id, "sam")]

    client.post(f"/api/conversations/{conversation_id}/hand-back", json={"operator": "sam"}, headers=admin)
    detail = client.get(f"/api/conversations/{conversation_id}", headers=admin).json()
    assert detail["handoff"] is None and detail["can_hand_off"] is True
    assert [m["role"] for m in detail["messages"]] == ["user", "agent", "system", "operator", "system"]
    assert detail["traces"][0]["reply"] == "echo: do you rent tandems?"
    assert client.get("/api/conversations", headers={"Authorization": "Bearer wrong"}).status_code == 401

"""Twilio voice numbers added through /api/connections: each call answered as the connection's agent,
from its number, on its own webhook, status and relay URLs, signed by its own account."""

from __future__ import annotations

import json
import uuid
import xml.etree.ElementTree as ET

import pytest
from pydantic import SecretStr
from websockets.exceptions import InvalidStatus

from gateway.core.models import Role
from tests.admin_ui.conftest import PASSWORD
from tests.channels import vendors
from tests.channels.conftest import settle, wait_until
from tests.channels.connections_support import ADMIN, SECRET_KEY, add, webhook_path
from tests.channels.relay_client import incoming_call, open_url, prompt, relay_url_of, setup, signature, socket, tokens
from tests.channels.test_handoff import console  # noqa: F401  (a fixture: the signed-in console)
from tests.fakes import twilio_api

SID, TOKEN, NUMBER = "AC" + "5" * 32, "voice-connection-token-5555", "+15550005555"
OTHER_SID, OTHER_TOKEN = "AC" + "6" * 32, "other-voice-token-6666"
CALLER = vendors.CALLER


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY), "retrieval_strategy": "hybrid",
            "admin_password": SecretStr(PASSWORD), "admin_user": "root"}


@pytest.fixture
def accounts(fake_twilio) -> None:
    fake_twilio.add_account(SID, TOKEN)
    fake_twilio.add_account(OTHER_SID, OTHER_TOKEN)


def _agent(client, name: str) -> str:
    assert client.post("/api/kb/bases", json={"name": name + "_kb"}, headers=ADMIN).status_code == 201
    prompt_text = f"You are the {name} desk; answer only about {name}.\n{{context_str}}\nQuestion: {{query_str}}"
    answer = client.post("/v1/agents", headers=ADMIN, json={"name": name, "config": {
        "knowledgeBases": [name + "_kb"], "systemPrompt": prompt_text}})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def _voice(client, agent: str | None = None, *, sid: str = SID, token: str = TOKEN, number: str = NUMBER) -> dict:
    body = {"kind": "twilio_voice", "name": f"Line {number}", "credentials": {
        "account_sid": sid, "auth_token": token, "phone_number": number}}
    return add(client, **body, **({"agent": agent} if agent else {}))


def _call(call_sid: str, **extra: str) -> dict[str, str]:
    return {**vendors.call_params(call_sid, **extra), "AccountSid": SID, "To": NUMBER, "Called": NUMBER}


def _twiml(resp) -> ET.Element:
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("application/xml")
    return ET.fromstring(resp.text)


def _system_prompts(fake_openai) -> list[str]:
    return [json.dumps(r["body"]["messages"]) for r in fake_openai.chat_requests()]


def test_a_console_added_number_answers_a_gathered_call_as_its_agent(client, live, accounts, fake_openai, stored):
    bikes = _agent(client, "bikes")
    line = _voice(client, bikes)
    path = webhook_path(line)
    base = f"{vendors.PUBLIC_URL}/channels/twilio/{line['id']}/voice"
    assert path == f"/channels/twilio/{line['id']}/voice" and line["enabled"] and line["agent"] == bikes
    sid = "CA" + uuid.uuid4().hex
    # the environment account's signature does not open a connection's webhook
    assert vendors.post_twilio(client, path, _call(sid, CallStatus="ringing")).status_code == 403
    root = _twiml(vendors.post_twilio(client, path, _call(sid, CallStatus="ringing"), token=TOKEN))
    gather, redirect = list(root)
    assert gather.get("action") == f"{base}/turn?n=1" and redirect.text == f"{base}/turn?n=1&quiet=1"
    assert gather.find("Say").text == "Hello! How can I help you today?"

    fake_openai.script_reply("Our e-bikes are **35 euros** a day.")
    turn = vendors.post_twilio(client, f"{path}/turn?n=1", _call(sid, SpeechResult="How much is a bike?"),
                               token=TOKEN)
    answered = _twiml(turn)
    assert answered.find("Gather/Say").text == "Our e-bikes are 35 euros a day."
    assert answered.find("Gather").get("action") == f"{base}/turn?n=2"
    [prompt_sent] = _system_prompts(fake_openai)
    assert "You are the bikes desk" in prompt_sent  # agent B's own prompt, not the channels' agent
    settle(live)
    question, reply = stored.messages(f"phone:{CALLER}@{line['id']}")
    assert (question.text, question.channel, reply.role) == ("How much is a bike?", "twilio_voice", Role.AGENT)
    [trace] = stored.traces(question)
    assert trace.connection == line["id"] and trace.agent == bikes
    assert stored.messages(f"phone:{CALLER}") == []  # not the environment number's customer
    status = client.get(f"/api/connections/{line['id']}", headers=ADMIN).json()["status"]
    assert status["last_inbound_at"] and status["last_outbound_at"] and status["last_error"] is None

    # its status callback, signed by its account, ends the call's conversation
    assert vendors.post_twilio(client, f"{path}/status", _call(sid, CallStatus="completed")).status_code == 403
    assert vendors.post_twilio(client, f"{path}/status", _call(sid, CallStatus="completed"),
                               token=TOKEN).status_code == 204
    conversation = json.loads(stored.redis.get(stored.services.store.key("conv", question.conversation_id)))
    assert conversation["ended_at"] is not None and conversation["end_reason"] == "call_ended"


def test_a_disabled_deleted_or_unknown_number_answers_404(client, live, accounts, fake_openai, stored):
    line = _voice(client)
    path = webhook_path(line)
    assert client.patch(f"/api/connections/{line['id']}", json={"enabled": False}, headers=ADMIN).status_code == 200
    refused = vendors.post_twilio(client, path, _call("CA" + uuid.uuid4().hex), token=TOKEN)
    assert refused.status_code == 404 and refused.json()["error"] == "not_found"
    turn = vendors.post_twilio(client, f"{path}/turn?n=1", _call("CA" + uuid.uuid4().hex, SpeechResult="hi"),
                               token=TOKEN)
    assert turn.status_code == 404
    assert client.delete(f"/api/connections/{line['id']}", headers=ADMIN).status_code == 204
    assert vendors.post_twilio(client, path, _call("CA" + uuid.uuid4().hex), token=TOKEN).status_code == 404
    unknown = vendors.post_twilio(client, "/channels/twilio/0123456789ab/voice", _call("CA1"), token=TOKEN)
    assert unknown.status_code == 404
    settle(live)
    assert fake_openai.chat_requests() == [] and stored.keys("msg:*") == []


def test_a_customer_who_texted_the_number_is_remembered_when_they_call_it(client, live, accounts, fake_twilio,
                                                                          fake_openai, stored):
    sms = add(client, kind="twilio_sms", name="Shop texts", credentials={
        "account_sid": SID, "auth_token": TOKEN, "phone_number": NUMBER})
    line = _voice(client)
    elsewhere = _voice(client, number="+15550007777")  # another number of the same account: other customers
    text = {"MessageSid": "SM" + uuid.uuid4().hex, "AccountSid": SID, "From": CALLER, "To": NUMBER,
            "Body": "I booked the blue tandem for Saturday", "NumMedia": "0", "ApiVersion": "2010-04-01"}
    assert vendors.post_twilio(client, webhook_path(sms), text, token=TOKEN).status_code == 200
    settle(live)
    assert fake_twilio.sent_texts(CALLER) == ["echo: I booked the blue tandem for Saturday"]

    sid = "CA" + uuid.uuid4().hex
    _twiml(vendors.post_twilio(client, f"{webhook_path(line)}/turn?n=1",
                               _call(sid, SpeechResult="Which bike did I book?"), token=TOKEN))
    settle(live)
    called = _system_prompts(fake_openai)[-1]
    assert "I booked the blue tandem for Saturday" in called  # the text is in the call's memory
    # one customer of the number: the SMS connection (the number's first) scopes both
    transcript = stored.messages(f"phone:{CALLER}@{sms['id']}")
    assert [(m.channel, m.text) for m in transcript if m.role == Role.USER] == [
        ("twilio_sms", "I booked the blue tandem for Saturday"), ("twilio_voice", "Which bike did I book?")]
    assert stored.persona_id(f"phone:{CALLER}@{line['id']}") is None

    _twiml(vendors.post_twilio(client, f"{webhook_path(elsewhere)}/turn?n=1",
                               _call("CA" + uuid.uuid4().hex, SpeechResult="Which bike did I book?"), token=TOKEN))
    settle(live)
    assert "blue tandem" not in _system_prompts(fake_openai)[-1]
    assert stored.persona_id(f"phone:{CALLER}@{elsewhere['id']}") not in (None, stored.persona_id(
        f"phone:{CALLER}@{sms['id']}"))


@pytest.fixture
def relay_mode(channel_overrides) -> None:
    channel_overrides["twilio_voice_mode"] = "relay"


def test_a_relay_call_to_the_number_is_answered_as_its_agent(relay_mode, client, live, accounts, fake_openai,
                                                             stored):
    boats = _agent(client, "boats")
    line = _voice(client, boats)
    path = webhook_path(line)
    answer = vendors.post_twilio(client, path, _call("CA" + "7" * 32), token=TOKEN)
    assert answer.status_code == 200
    connection_base = f"{vendors.PUBLIC_URL}/channels/twilio/{line['id']}"
    assert f'<Connect action="{connection_base}/voice/relay-ended" method="POST">' in answer.text
    url = relay_url_of(answer.text)
    assert url.startswith(f"wss://bot.example.com/channels/twilio/{line['id']}/relay?ticket=")

    fake_openai.script_reply("Kayaks are **80 euros** a day [1].")
    call_sid = "CA" + "8" * 32
    with socket(live, call_sid, path=path, token=TOKEN) as ws:
        setup(ws, call_sid)
        prompt(ws, "How much is a kayak?")
        got = tokens(ws)
    spoken = "".join(m["token"] for _, m in got if m["type"] == "text")
    assert spoken.strip() == "Kayaks are 80 euros a day ."
    assert "You are the boats desk" in _system_prompts(fake_openai)[-1]
    messages = wait_until(lambda: [m for m in stored.messages(f"phone:{CALLER}@{line['id']}")
                                   if m.role == Role.AGENT])
    assert messages[-1].channel == "twilio_relay" and "80 euros" in messages[-1].text
    [trace] = [t for t in stored.traces(messages[-1]) if t.reply]
    assert trace.connection == line["id"] and trace.agent == boats

    def status() -> dict:
        return client.get(f"/api/connections/{line['id']}", headers=ADMIN).json()["status"]

    noted = wait_until(lambda: (now := status())["last_outbound_at"] and now, what="the reply noted")
    assert noted["last_inbound_at"] and noted["last_error"] is None


def _moved(url: str, relay_path: str) -> str:
    """The same ticket, presented at another number's socket."""
    return f"wss://bot.example.com{relay_path}?{url.split('?', 1)[1]}"


def test_a_ticket_opens_only_its_own_numbers_socket(relay_mode, client, live, accounts, fake_openai, stored):
    mine, theirs = _voice(client), _voice(client, sid=OTHER_SID, token=OTHER_TOKEN, number="+15550006666")
    mine_path, theirs_relay = webhook_path(mine), f"/channels/twilio/{theirs['id']}/relay"

    def refused(url: str, token: str) -> None:
        with pytest.raises(InvalidStatus) as caught:
            open_url(live, url, {"X-Twilio-Signature": signature(url, token)})
        assert caught.value.response.status_code == 403

    # a ticket issued for my number's call, signed as Twilio signs for the other number's socket
    refused(_moved(incoming_call(live, path=mine_path, token=TOKEN), theirs_relay), OTHER_TOKEN)
    # … or for the environment's socket
    refused(_moved(incoming_call(live, path=mine_path, token=TOKEN), "/channels/twilio/relay"),
            twilio_api.AUTH_TOKEN)
    # the environment number's ticket on my number's socket
    refused(_moved(incoming_call(live), f"/channels/twilio/{mine['id']}/relay"), TOKEN)
    # my number's URL signed by another account
    refused(incoming_call(live, path=mine_path, token=TOKEN), twilio_api.AUTH_TOKEN)
    assert fake_openai.chat_requests() == []

    # its own URL, signed by its own account, opens; a disabled number's socket does not
    url = incoming_call(live, path=mine_path, token=TOKEN)
    with open_url(live, url, {"X-Twilio-Signature": signature(url, TOKEN)}) as ws:
        setup(ws)
        prompt(ws, "hello")
        assert "".join(m["token"] for _, m in tokens(ws) if m["type"] == "text").strip() == "echo: hello"
    url = incoming_call(live, path=mine_path, token=TOKEN)
    assert client.patch(f"/api/connections/{mine['id']}", json={"enabled": False}, headers=ADMIN).status_code == 200
    refused(url, TOKEN)


def test_the_console_says_which_urls_to_paste_at_twilio(client, live, accounts, console):  # noqa: F811
    line = _voice(client)
    page = console.get(f"/admin/channels/{line['id']}").text
    assert f'<code id="webhook-url">{line["webhook_url"]}</code>' in page
    assert f"<code>{line['webhook_url']}/status</code> as its \"Call status changes\" URL" in page
    assert "not routed" not in page

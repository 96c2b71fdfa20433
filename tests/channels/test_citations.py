"""Each channel shows a reply's sources its own way: Telegram and Slack append a numbered list, SMS
drops the [N] markers, web chat keeps them on the stored message — which survives a restart."""

from __future__ import annotations

import httpx
import pytest

from gateway.http.app import create_app
from tests.channels import vendors
from tests.channels.conftest import settle
from tests.fakes.live_server import LiveServer

ADMIN = {"Authorization": "Bearer admin-secret"}
TOPICS = [{"source": "rent", "title": "E-bike rental prices", "facts": ["35 euros per day"],
           "summary": "E-bikes cost 35 euros per day, helmet included."}]
QUESTION = "How much does an e-bike rental cost per day?"
ANSWER = "E-bikes cost 35 euros a day [1]. Helmets are free [4]."
FOOTNOTED = "E-bikes cost 35 euros a day [1]. Helmets are free.\n\nSources:\n[1] E-bike rental prices"


@pytest.fixture
def channel_overrides() -> dict:
    return {"citations_format": "footnote", "retrieval_strategy": "hybrid"}


@pytest.fixture
def knowledge(client) -> None:
    assert client.post("/api/kb/topics", json=TOPICS, headers=ADMIN).status_code == 201


def test_telegram_appends_the_numbered_sources(client, live, knowledge, fake_telegram, fake_openai, stored):
    fake_openai.script_reply(ANSWER)
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message(QUESTION)))
    settle(live)
    [sent] = fake_telegram.recorder.received("sendMessage")
    assert sent.params["text"] == FOOTNOTED
    [agent] = [m for m in stored.messages(f"telegram:{vendors.USER_ID}") if m.role.value == "agent"]
    assert agent.text == "E-bikes cost 35 euros a day [1]. Helmets are free."  # the list is the channel's
    assert [(s.n, s.source, s.cited) for s in agent.sources] == [(1, "rent", True)]
    [trace] = stored.traces(agent)
    assert trace.citations.cited == [1] and trace.citations.invalid == [4]


def test_slack_appends_the_numbered_sources(client, live, knowledge, fake_slack, fake_openai):
    fake_openai.script_reply(ANSWER)
    event = vendors.slack_event(f"<@{vendors.slack_api.BOT_USER_ID}> {QUESTION}", ts="1710000000.000200")
    assert vendors.post_slack(client, vendors.slack_envelope(event)).status_code == 200
    settle(live)
    [posted] = fake_slack.posted()
    assert posted["text"] == FOOTNOTED


def test_sms_drops_the_markers(client, live, knowledge, fake_twilio, fake_openai):
    fake_openai.script_reply(ANSWER)
    vendors.post_twilio(client, "/channels/twilio/sms", vendors.sms_params(QUESTION))
    settle(live)
    assert fake_twilio.sent_texts() == ["E-bikes cost 35 euros a day. Helmets are free."]


def test_web_chat_sources_survive_a_restart(channel_settings, fake_openai):
    fake_openai.script_reply(ANSWER)
    with LiveServer(create_app(channel_settings)) as first, httpx.Client(base_url=first.url, timeout=10) as c:
        assert c.post("/api/kb/topics", json=TOPICS, headers=ADMIN).status_code == 201
        session = c.post("/api/chat/sessions").json()
        auth = {"Authorization": f"Bearer {session['token']}"}
        answer = c.post(f"/api/chat/sessions/{session['session_id']}/messages", json={"text": QUESTION},
                        headers=auth).json()
    assert answer["reply"]["text"] == "E-bikes cost 35 euros a day [1]. Helmets are free."  # no list on the web
    expected = [{"n": 1, "source": "rent", "title": "E-bike rental prices", "score": answer["sources"][0]["score"],
                 "url": None, "cited": True}]
    assert answer["sources"] == expected
    # A new gateway process on the same Redis: the transcript still has the sources.
    with LiveServer(create_app(channel_settings)) as second, httpx.Client(base_url=second.url, timeout=10) as c:
        messages = c.get(f"/api/chat/sessions/{session['session_id']}/messages", headers=auth).json()["messages"]
        [row] = [r for r in c.get("/api/conversations", params={"channel": "webchat"}, headers=ADMIN)
                 .json()["conversations"] if r["persona_id"] == session["persona_id"]]
        transcript = c.get(f"/api/conversations/{row['id']}", headers=ADMIN).json()  # the operators' transcript
    assert [m["sources"] for m in messages if m["role"] == "agent"] == [expected]
    assert [m["sources"] for m in messages if m["role"] == "user"] == [[]]
    assert [m["sources"] for m in transcript["messages"] if m["role"] == "agent"] == [expected]
    assert [t["citations"] for t in transcript["traces"]] == [
        {"format": "footnote", "verify": True, "cited": [1], "invalid": [4]}]

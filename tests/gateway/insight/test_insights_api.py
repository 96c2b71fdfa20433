"""Feedback, outcomes and cost against a live gateway: web chat visitors rate replies, the agent API answers
with another agent and model, and ``GET /api/insights`` sums what the fake model server reported."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import httpx
import pytest
from pydantic import SecretStr

from gateway.core.settings import ModelPrice
from gateway.http.app import create_app
from tests.admin_ui.conftest import PASSWORD, sign_in
from tests.fakes.live_server import LiveServer
from tests.fakes.openai_server import embedding_tokens

ADMIN = {"Authorization": "Bearer admin-secret"}
PRICES = {"model-a": {"input": 2.5, "output": 10.0}, "model-b": {"input": 0.15, "output": 0.6}}


def fake_usage(text: str) -> tuple[int, int]:
    """What tests/fakes/openai_server.py reports for a reply (its ``usage``)."""
    return 11, max(1, len(text) // 4)


@pytest.fixture
def overrides() -> dict:
    return {}


@pytest.fixture
def api(settings, overrides) -> Iterator[httpx.Client]:
    prices = {model: ModelPrice(**price) for model, price in PRICES.items()}
    tuned = settings.model_copy(update={"llm_model": "model-a", "model_prices": prices, **overrides})
    with LiveServer(create_app(tuned)) as server, httpx.Client(base_url=server.url, timeout=20) as client:
        yield client


class Visitor:
    def __init__(self, api: httpx.Client) -> None:
        self.api = api
        body = api.post("/api/chat/sessions").json()
        self.session_id = body["session_id"]
        self.auth = {"Authorization": f"Bearer {body['token']}", "X-Chat-Session": body["session_id"]}

    def say(self, text: str) -> dict:
        answer = self.api.post(f"/api/chat/sessions/{self.session_id}/messages", json={"text": text},
                               headers={"Authorization": self.auth["Authorization"]})
        assert answer.status_code == 200, answer.text
        return answer.json()["reply"]

    def rate(self, reply: dict, rating: str, comment: str | None = None, headers: dict | None = None):
        body = {"rating": rating, **({"comment": comment} if comment is not None else {})}
        return self.api.post(f"/api/conversations/{reply['conversation_id']}/messages/{reply['message_id']}/feedback",
                             json=body, headers=self.auth if headers is None else headers)


def insights(api: httpx.Client, **query) -> dict:
    answer = api.get("/api/insights", params=query, headers=ADMIN)
    assert answer.status_code == 200, answer.text
    return answer.json()


WEB_TURNS, API_TURNS = 25, 25  # 50 scripted turns: two agents, two channels, two models


def test_cost_is_tokens_times_price_across_two_agents_and_channels(api, fake_openai):
    agent = api.post("/v1/agents", headers=ADMIN, json={"name": "pricey", "config": {"llmModelId": "model-b"}}).json()
    key = api.post("/api/keys", headers=ADMIN, json={"name": "caller", "agents": [agent["id"]]}).json()["key"]
    spent = {"model-a": [0, 0], "model-b": [0, 0]}
    visitors = [Visitor(api), Visitor(api)]
    for i in range(WEB_TURNS):
        text = f"Web answer {i}: " + "words " * i
        fake_openai.script_reply(text)
        visitors[i % 2].say(f"question {i}")
        spent["model-a"] = [a + b for a, b in zip(spent["model-a"], fake_usage(text), strict=True)]
    for i in range(API_TURNS):
        text = f"API answer {i}: " + "more " * (3 * i)
        fake_openai.script_reply(text)
        answer = api.post(f"/v1/agents/{agent['id']}/versions/latest/invoke",
                          headers={"Authorization": f"Bearer {key}"},
                          json={"messages": [{"role": "user", "content": f"api question {i}"}]})
        assert answer.status_code == 200, answer.text
        spent["model-b"] = [a + b for a, b in zip(spent["model-b"], fake_usage(text), strict=True)]
    models = [r["body"]["model"] for r in fake_openai.chat_requests()]
    assert models == ["model-a"] * WEB_TURNS + ["model-b"] * API_TURNS

    def cost(model: str) -> float:
        prompt, completion = spent[model]
        return (prompt * PRICES[model]["input"] + completion * PRICES[model]["output"]) / 1_000_000

    report = insights(api)
    assert report["tokens"]["prompt"] == spent["model-a"][0] + spent["model-b"][0]
    assert report["tokens"]["completion"] == spent["model-a"][1] + spent["model-b"][1]
    assert report["cost"] == pytest.approx(cost("model-a") + cost("model-b"), abs=1e-9)
    assert report["turns"] == WEB_TURNS + API_TURNS == 50
    assert report["conversations"] == 2 + API_TURNS  # each API call without a session: its own
    web = insights(api, channel="webchat")
    assert web["cost"] == pytest.approx(cost("model-a"), abs=1e-9) and web["turns"] == WEB_TURNS
    by_agent = insights(api, agent=f"{agent['id']}@{agent['version_id']}")
    assert by_agent["cost"] == pytest.approx(cost("model-b"), abs=1e-9)
    assert by_agent["tokens"] == {"prompt": spent["model-b"][0], "completion": spent["model-b"][1], "unpriced": 0}
    [today] = [d for d in report["by_day"] if d["turns"]]
    assert today["cost"] == report["cost"]
    # The breakdowns: per API key (the agent API's calls), per agent and per channel.
    [by_key] = report["by_api_key"]
    assert (by_key["name"], by_key["turns"]) == ("caller", API_TURNS)
    assert by_key["tokens"] == {"prompt": spent["model-b"][0], "completion": spent["model-b"][1]}
    assert by_key["cost"] == pytest.approx(cost("model-b"), abs=1e-9)
    assert {row["name"]: (row["turns"], row["cost"]) for row in report["by_channel"]} == {
        "webchat": (WEB_TURNS, pytest.approx(cost("model-a"), abs=1e-9)),
        "api": (API_TURNS, pytest.approx(cost("model-b"), abs=1e-9))}
    assert {row["name"]: row["conversations"] for row in report["by_agent"]} == {
        "": 2, f"{agent['id']}@{agent['version_id']}": API_TURNS}
    metrics = api.get("/metrics").text
    assert f'switchboard_model_tokens_total{{agent="",channel="webchat",kind="prompt"}} {11.0 * WEB_TURNS}' in metrics


def test_a_visitor_rates_a_reply_down_with_a_comment_and_insights_show_it(api, fake_openai):
    visitor = Visitor(api)
    fake_openai.script_reply("We open at nine.")
    reply = visitor.say("When do you open?")
    first = visitor.rate(reply, "up")
    assert first.status_code == 200, first.text
    assert (first.json()["rating"], first.json()["voter"]) == ("up", f"web:{visitor.session_id}")
    assert insights(api)["feedback"] == {"up": 1, "down": 0, "comments": 0}

    changed = visitor.rate(reply, "down", "  It is ten on Sundays.  ")  # one vote per reply: this one replaces it
    assert changed.status_code == 200 and changed.json()["comment"] == "It is ten on Sundays."
    report = insights(api, channel="webchat")
    assert report["feedback"] == {"up": 0, "down": 1, "comments": 1}
    assert [(c["rating"], c["comment"], c["message_id"]) for c in report["recent_comments"]] == [
        ("down", "It is ten on Sundays.", reply["message_id"])]
    assert insights(api, channel="telegram")["feedback"] == {"up": 0, "down": 0, "comments": 0}

    admin = visitor.rate(reply, "up", headers=ADMIN)  # another voter: the admin token
    assert admin.status_code == 200 and admin.json()["voter"] == "admin"
    assert insights(api)["feedback"] == {"up": 1, "down": 1, "comments": 1}


def test_votes_on_unknown_or_another_conversations_message_are_404_and_count_nothing(api, fake_openai):
    mine, theirs = Visitor(api), Visitor(api)
    my_reply, their_reply = mine.say("hello"), theirs.say("hi there")
    user_message = api.get(f"/api/chat/sessions/{mine.session_id}/messages",
                           headers={"Authorization": mine.auth["Authorization"]}).json()["messages"][0]
    assert user_message["role"] == "user"
    attempts = [
        mine.rate({**my_reply, "message_id": their_reply["message_id"]}, "down"),  # their reply, my conversation
        mine.rate(their_reply, "down"),  # their conversation, with my session
        mine.rate({**my_reply, "message_id": "nope"}, "down"),
        mine.rate({**my_reply, "message_id": user_message["id"]}, "down"),  # not a bot reply
        mine.rate({**their_reply, "message_id": my_reply["message_id"]}, "down", headers=ADMIN),
    ]
    assert [(a.status_code, a.json()["error"]) for a in attempts] == [(404, "not_found")] * 5
    wrong_token = mine.rate(my_reply, "down", headers={**mine.auth, "Authorization": "Bearer nope"})
    assert wrong_token.status_code == 401
    no_auth = mine.rate(my_reply, "down", headers={})
    assert no_auth.status_code == 401
    bad = mine.rate(my_reply, "sideways")
    assert bad.status_code == 422 and "rating" in bad.json()["message"]
    assert insights(api)["feedback"] == {"up": 0, "down": 0, "comments": 0}


@pytest.mark.parametrize("overrides", [{"webchat_messages_per_session": 3}], ids=["limit-3"])
def test_votes_are_rate_limited_with_the_chat_messages(api, fake_openai, overrides):
    visitor = Visitor(api)
    reply = visitor.say("hello")
    answers = [visitor.rate(reply, "up" if i % 2 else "down").status_code for i in range(4)]
    assert answers[:2] == [200, 200] and answers[2:] == [429, 429]


TOPICS = [
    {"source": "hours", "title": "Opening hours", "facts": ["open 9 to 17"],
     "summary": "We open at 9 and close at 17."},
    {"source": "orders", "title": "Where is my order", "facts": ["orders ship in 2 days"],
     "summary": "Orders ship within 2 days; the tracking link is in the confirmation mail."},
]


def outcome_metric(metrics: str, outcome: str) -> float:
    line = f'switchboard_conversation_outcomes_total{{agent="",channel="webchat",outcome="{outcome}"}} '
    return next((float(row.removeprefix(line)) for row in metrics.splitlines() if row.startswith(line)), 0.0)


def listed(api: httpx.Client, **query) -> list[str]:
    answer = api.get("/api/conversations", params=query, headers=ADMIN)
    assert answer.status_code == 200, answer.text
    return [row["id"] for row in answer.json()["conversations"]]


@pytest.mark.parametrize("overrides", [{"inactivity_timeout_s": 1, "retrieval_strategy": "bm25",
                                        "admin_password": SecretStr(PASSWORD), "admin_user": "root"}],
                         ids=["idle-1s"])
def test_outcomes_resolved_handed_off_and_unanswered(api, fake_openai, overrides):
    for topic in TOPICS:
        assert api.post("/api/kb/topics", json=topic, headers=ADMIN).status_code == 201
    happy, unhappy, stuck, lost, puzzled = (Visitor(api) for _ in range(5))
    happy_first = happy.say("When do you open?")["conversation_id"]
    unhappy.rate(unhappy.say("Where is my order?"), "down")
    stuck_id = stuck.say("I want to talk to a human please")["conversation_id"]
    fake_openai.script_reply("Sorry, I don't know whether we open on holidays.")
    lost_first = lost.say("When do you open on holidays?")["conversation_id"]  # hours found; the model did not know
    puzzled_id = puzzled.say("Do you rent unicycles?")["conversation_id"]  # retrieval found nothing
    puzzled.say("Are unicycles for rent?")  # the same words: one gap group, the conversation counted once
    time.sleep(1.3)  # past SWITCHBOARD_INACTIVITY_TIMEOUT_S: the next message ends the conversation first
    for visitor in (happy, unhappy, lost):
        visitor.say("When do you open?")
    report = insights(api)
    assert report["conversations"] == 8 and report["turns"] == 9
    assert report["handed_off"] == 1
    assert report["unanswered"] == 2  # lost's and puzzled's first conversations
    # happy's and lost's first conversations ended idle with no handoff and no 👎 standing
    assert report["resolved"] == 2
    assert report["feedback"]["down"] == 1
    metrics = api.get("/metrics").text  # the same counts, once per conversation, for graphing elsewhere
    assert {name: outcome_metric(metrics, name) for name in ("resolved", "handed_off", "unanswered", "abandoned")} \
        == {"resolved": 2, "handed_off": 1, "unanswered": 2, "abandoned": 0}
    gaps = {g["id"]: g for g in report["gaps"]}
    [unicycles] = [g for g in gaps.values() if "Do you rent unicycles?" in g["examples"]]
    assert unicycles["count"] == 2 and set(unicycles["examples"]) == {"Do you rent unicycles?",
                                                                       "Are unicycles for rent?"}
    [holidays] = [g for g in gaps.values() if g["examples"] == ["When do you open on holidays?"]]
    assert holidays["offered_topics"] == ["hours"]
    assert len(gaps) == 2
    dismissed = api.post(f"/api/insights/gaps/{unicycles['id']}/dismiss", headers=ADMIN)
    assert dismissed.status_code == 200
    assert [g["id"] for g in insights(api)["gaps"]] == [holidays["id"]]

    # The conversation list filters by outcome (newest activity first), alone or with a channel or text.
    assert listed(api, outcome="handed_off") == [stuck_id]
    assert listed(api, outcome="unanswered") == [puzzled_id, lost_first]
    assert listed(api, outcome="resolved") == [lost_first, happy_first]
    assert listed(api, outcome="abandoned") == []
    assert listed(api, outcome="unanswered", channel="webchat") == [puzzled_id, lost_first]
    assert listed(api, outcome="unanswered", channel="telegram") == []
    assert listed(api, outcome="unanswered", q="unicycles") == [puzzled_id]
    assert listed(api, outcome="handed_off", status="waiting") == [stuck_id]
    assert listed(api, outcome="resolved", status="ended") == [lost_first, happy_first]
    assert len(listed(api)) == 8
    assert api.get("/api/conversations", params={"outcome": "happy"}, headers=ADMIN).status_code == 422
    with httpx.Client(base_url=str(api.base_url), timeout=20) as console:
        sign_in(console)
        page = console.get("/admin/conversations", params={"outcome": "handed_off"}).text
    assert '<option value="handed_off" selected>Handed off</option>' in page
    assert re.findall(r'<tr data-conversation="([^"]+)"', page) == [stuck_id]


def test_insights_refuse_bad_ranges_and_need_the_admin_token(api):
    assert api.get("/api/insights").status_code == 401
    bad = api.get("/api/insights", params={"from": "yesterday"}, headers=ADMIN)
    assert bad.status_code == 422 and "from" in bad.json()["message"]
    backwards = api.get("/api/insights", params={"from": "2026-02-02", "to": "2026-01-01"}, headers=ADMIN)
    assert backwards.status_code == 422


def test_an_api_caller_rates_invoke_and_chat_completion_answers_by_their_id(api, fake_openai):
    agent = api.post("/v1/agents", headers=ADMIN, json={"name": "rated", "config": {"llmModelId": "model-b"}}).json()
    other = api.post("/v1/agents", headers=ADMIN, json={"name": "other"}).json()
    key = api.post("/api/keys", headers=ADMIN, json={"name": "caller", "agents": [agent["id"]]}).json()["key"]
    stranger = api.post("/api/keys", headers=ADMIN, json={"name": "x", "agents": [other["id"]]}).json()["key"]
    caller = {"Authorization": f"Bearer {key}"}
    invoked = api.post(f"/v1/agents/{agent['id']}/versions/latest/invoke", headers=caller,
                       json={"messages": [{"role": "user", "content": "hours?"}]}).json()
    completed = api.post("/v1/chat/completions", headers=caller,
                         json={"model": "rated", "messages": [{"role": "user", "content": "price?"}]}).json()
    assert completed["id"].startswith("chatcmpl-")
    first = api.post("/v1/feedback", headers=caller, json={"response_id": invoked["id"], "rating": "down",
                                                           "comment": "Wrong hours."})
    assert first.status_code == 200, first.text
    keys = api.get("/api/keys", headers=ADMIN).json()["keys"]
    [key_id] = [k["id"] for k in keys if k["name"] == "caller"]
    assert (first.json()["rating"], first.json()["voter"]) == ("down", f"key:{key_id}")
    second = api.post("/v1/feedback", headers=caller, json={"response_id": completed["id"], "rating": "up"})
    assert second.status_code == 200, second.text
    report = insights(api, channel="api")
    assert report["feedback"] == {"up": 1, "down": 1, "comments": 1}
    assert [c["comment"] for c in report["recent_comments"]] == ["Wrong hours."]

    refused = [
        api.post("/v1/feedback", headers={"Authorization": f"Bearer {stranger}"},
                 json={"response_id": invoked["id"], "rating": "up"}),  # a key that may not call its agent
        api.post("/v1/feedback", headers=caller, json={"response_id": "chatcmpl-nope", "rating": "up"}),
    ]
    assert [(r.status_code, r.json()["error"]) for r in refused] == [(404, "not_found")] * 2
    assert api.post("/v1/feedback", json={"response_id": invoked["id"], "rating": "up"}).status_code == 401
    assert insights(api, channel="api")["feedback"] == {"up": 1, "down": 1, "comments": 1}


def test_the_export_streams_conversations_with_messages_ratings_tokens_and_cost(api, fake_openai):
    import csv
    import io
    import json

    visitor = Visitor(api)
    fake_openai.script_reply("We open at nine on weekdays.")
    reply = visitor.say("When do you open?")
    assert visitor.rate(reply, "down", "And on Sundays?").status_code == 200
    other = Visitor(api)
    fake_openai.script_reply("Tandems cost 50 euros.")
    other.say("Tandem price?")
    expected = {"We open at nine on weekdays.": fake_usage("We open at nine on weekdays."),
                "Tandems cost 50 euros.": fake_usage("Tandems cost 50 euros.")}

    assert api.get("/api/conversations/export").status_code == 401
    lines = api.get("/api/conversations/export", params={"format": "jsonl"}, headers=ADMIN)
    assert lines.status_code == 200 and lines.headers["content-type"].startswith("application/x-ndjson")
    rows = [json.loads(line) for line in lines.text.splitlines()]
    assert [r["id"] for r in rows] == [other_id := rows[0]["id"], reply["conversation_id"]] and other_id
    mine = rows[1]
    assert [(m["role"], m["text"]) for m in mine["messages"]] == [
        ("user", "When do you open?"), ("agent", "We open at nine on weekdays.")]
    assert mine["messages"][1]["rating"] == "down" and mine["messages"][1]["comment"] == "And on Sundays?"
    assert "rated_down" in mine["outcome"] and mine["channel"] == "webchat"
    prompt, completion = expected["We open at nine on weekdays."]
    assert (mine["prompt_tokens"], mine["completion_tokens"]) == (prompt, completion)
    assert mine["cost"] == pytest.approx((prompt * 2.5 + completion * 10.0) / 1_000_000, abs=1e-9)

    table = api.get("/api/conversations/export", params={"format": "csv"}, headers=ADMIN)
    assert table.headers["content-type"].startswith("text/csv")
    records = list(csv.DictReader(io.StringIO(table.text)))
    assert [(r["conversation_id"], r["role"], r["text"], r["rating"]) for r in records] == [
        (other_id, "user", "Tandem price?", ""), (other_id, "agent", "Tandems cost 50 euros.", ""),
        (mine["id"], "user", "When do you open?", ""), (mine["id"], "agent", "We open at nine on weekdays.", "down")]
    old = api.get("/api/conversations/export", params={"from": "2020-01-01", "to": "2020-01-31"}, headers=ADMIN)
    assert old.status_code == 200 and old.text == ""


def test_an_edited_price_prices_the_next_turns_and_removing_it_restores_the_table(api, fake_openai):
    table = {row["model"]: row for row in api.get("/api/insights/prices", headers=ADMIN).json()["prices"]}
    assert table["model-a"] == {"model": "model-a", "input": 2.5, "output": 10.0, "source": "environment"}
    assert table["gpt-4o-mini"]["source"] == "built-in"
    assert api.put("/api/insights/prices/model-a", json={"input": -1, "output": 1}).status_code == 401
    assert api.put("/api/insights/prices/model-a", headers=ADMIN, json={"input": -1, "output": 1}).status_code == 422
    edited = api.put("/api/insights/prices/model-a", headers=ADMIN, json={"input": 100.0, "output": 1000.0}).json()
    assert edited == {"model": "model-a", "input": 100.0, "output": 1000.0, "source": "edited"}
    fake_openai.script_reply("Priced anew.")
    Visitor(api).say("how much?")
    prompt, completion = fake_usage("Priced anew.")
    assert insights(api)["cost"] == pytest.approx((prompt * 100 + completion * 1000) / 1e6, abs=1e-9)
    assert api.delete("/api/insights/prices/model-a", headers=ADMIN).json()["removed"] is True
    assert api.delete("/api/insights/prices/model-a", headers=ADMIN).status_code == 404
    table = {row["model"]: row for row in api.get("/api/insights/prices", headers=ADMIN).json()["prices"]}
    assert table["model-a"]["source"] == "environment" and table["model-a"]["input"] == 2.5


def test_a_checks_model_call_is_counted_and_priced_with_the_reply(api, fake_openai):
    """The agent API's hallucination check is a second model call of the turn (structured generation, the
    search model): its tokens, as the fake model server reports them, are priced and counted too."""
    agent = api.post("/v1/agents", headers=ADMIN, json={"name": "checked", "config": {
        "llmModelId": "model-b", "enableHallucinationCheck": True}}).json()
    key = api.post("/api/keys", headers=ADMIN, json={"name": "checker", "agents": [agent["id"]]}).json()["key"]
    fake_openai.script_reply("We open 9:00-17:00.")
    verdict = '{"supported": true, "unsupported_claims": []}'
    fake_openai.script_json(verdict)
    answer = api.post(f"/v1/agents/{agent['id']}/versions/latest/invoke", headers={"Authorization": f"Bearer {key}"},
                      json={"messages": [{"role": "user", "content": "opening hours?"}]})
    assert answer.status_code == 200, answer.text
    assert [r["body"]["model"] for r in fake_openai.chat_requests()] == ["model-b", "model-a"]  # reply, judge
    reply, judge = fake_usage("We open 9:00-17:00."), fake_usage(verdict)
    report = insights(api)
    assert report["tokens"]["prompt"] == reply[0] + judge[0]
    assert report["tokens"]["completion"] == reply[1] + judge[1]
    expected = (reply[0] * 0.15 + reply[1] * 0.6 + judge[0] * 2.5 + judge[1] * 10.0) / 1e6
    assert report["cost"] == pytest.approx(expected, abs=1e-9)
    export = api.get("/api/conversations/export", headers=ADMIN, params={"format": "jsonl"}).text
    [line] = [json.loads(row) for row in export.splitlines()]
    assert (line["prompt_tokens"], line["completion_tokens"]) == (reply[0] + judge[0], reply[1] + judge[1])
    assert line["cost"] == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("overrides", [{"embeddings": "openai", "retrieval_strategy": "hybrid"}], ids=["openai"])
def test_the_query_embeddings_the_endpoint_reports_are_counted_and_priced_with_the_turn(api, fake_openai,
                                                                                        overrides):
    assert api.post("/api/kb/topics", json=TOPICS[0], headers=ADMIN).status_code == 201
    before = len(fake_openai.requests)  # the topic's own embedding is the knowledge base's, not a turn's
    fake_openai.script_reply("We open at nine.")
    reply = Visitor(api).say("When do you open on Sunday mornings?")
    embedded = [embedding_tokens(r["body"]["input"] if isinstance(r["body"]["input"], list) else [r["body"]["input"]])
                for r in fake_openai.requests[before:] if r["path"] == "/v1/embeddings"]
    assert embedded and sum(embedded) >= len("When do you open on Sunday mornings?".split())
    [trace] = api.get(f"/api/conversations/{reply['conversation_id']}", headers=ADMIN).json()["traces"]
    assert [(c["kind"], c["model"], c["prompt_tokens"]) for c in trace["model_calls"]] == [
        ("embedding", "text-embedding-3-small", n) for n in embedded]
    prompt, completion = fake_usage("We open at nine.")
    report = insights(api)
    assert report["tokens"] == {"prompt": prompt + sum(embedded), "completion": completion, "unpriced": 0}
    expected = (prompt * 2.5 + completion * 10.0 + sum(embedded) * 0.02) / 1e6  # text-embedding-3-small: 0.02
    assert report["cost"] == pytest.approx(expected, abs=1e-12)


def test_a_web_chat_client_that_disconnects_before_the_posted_answer_abandoned_it(api, fake_openai):
    patient, gone = Visitor(api), Visitor(api)
    patient.conversation_id = patient.say("When do you open?")["conversation_id"]  # answered as it waited
    fake_openai.script_reply("A slow answer.", delay_s=1.0)
    with httpx.Client(base_url=str(api.base_url), timeout=0.3) as impatient, pytest.raises(httpx.ReadTimeout):
        impatient.post(f"/api/chat/sessions/{gone.session_id}/messages", json={"text": "Tandem price?"},
                       headers={"Authorization": gone.auth["Authorization"]})
    deadline = time.monotonic() + 10
    while insights(api)["turns"] < 2 and time.monotonic() < deadline:  # the turn goes on and is stored
        time.sleep(0.05)
    report = insights(api)
    assert (report["turns"], report["abandoned"]) == (2, 1)
    assert outcome_metric(api.get("/metrics").text, "abandoned") == 1
    [abandoned] = listed(api, outcome="abandoned")
    transcript = api.get(f"/api/conversations/{abandoned}", headers=ADMIN).json()["messages"]
    assert [m["text"] for m in transcript] == ["Tandem price?", "A slow answer."]
    export = api.get("/api/conversations/export", params={"format": "jsonl"}, headers=ADMIN).text
    outcomes = {row["id"]: row["outcome"] for row in map(json.loads, export.splitlines())}
    assert "abandoned" in outcomes[abandoned] and "abandoned" not in outcomes[patient.conversation_id]

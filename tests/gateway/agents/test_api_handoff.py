"""The agent API runs the one turn pipeline: an API conversation taken over by an operator is held (no
model call) and the operator's reply comes back on the session's next call; asking for a person hands
off; the console's trace of an API turn has the stages of a web-chat turn."""

from __future__ import annotations

import uuid

import httpx

from tests.gateway.agents.conftest import ADMIN, key_for, make_agent


def _ask(api: httpx.Client, url: str, headers: dict, text: str) -> dict:
    answer = api.post(url, headers=headers, json={"messages": [{"role": "user", "content": text}]})
    assert answer.status_code == 200, answer.text
    return answer.json()


def _api_conversation(api: httpx.Client) -> str:
    [row] = api.get("/api/conversations", params={"channel": "api"}, headers=ADMIN).json()["conversations"]
    return row["id"]


def test_an_operator_takes_an_api_conversation_over_and_the_caller_gets_the_reply(api, fake_openai):
    agent = make_agent(api)
    caller = {"Authorization": f"Bearer {key_for(api, agent['id'])}", "X-Session-ID": str(uuid.uuid4())}
    url = f"/v1/agents/{agent['id']}/versions/latest/invoke"
    fake_openai.script_reply("We open at nine.")
    first = _ask(api, url, caller, "When do you open?")
    assert first["status"] == "completed" and first["customOutputs"]["operatorReplies"] == []
    conversation = _api_conversation(api)
    asked = len(fake_openai.chat_requests())

    taken = api.post(f"/api/conversations/{conversation}/take-over", headers=ADMIN, json={"operator": "ann"})
    assert taken.status_code == 200, taken.text
    held = _ask(api, url, caller, "Can I bring my dog?")
    assert held["status"] == "held" and held["output"] == [] and "ann" in held["customOutputs"]["held"]
    assert len(fake_openai.chat_requests()) == asked  # the model was not asked

    said = api.post(f"/api/conversations/{conversation}/reply", headers=ADMIN,
                    json={"operator": "ann", "text": "Dogs are welcome on a lead."})
    assert said.status_code == 200 and said.json()["role"] == "operator", said.text
    later = _ask(api, url, caller, "Great, thanks")
    assert [r["text"] for r in later["customOutputs"]["operatorReplies"]] == ["Dogs are welcome on a lead."]
    assert later["customOutputs"]["operatorReplies"][0]["author"].lower() == "ann" and later["status"] == "held"

    detail = api.get(f"/api/conversations/{conversation}", headers=ADMIN).json()
    assert detail["handoff"]["status"] == "human" and detail["handoff"]["operator"] == "ann"
    said_in_order = [(m["role"], m["text"]) for m in detail["messages"] if m["role"] != "system"]
    assert said_in_order == [("user", "When do you open?"), ("agent", "We open at nine."),
                             ("user", "Can I bring my dog?"), ("operator", "Dogs are welcome on a lead."),
                             ("user", "Great, thanks")]

    back = api.post(f"/api/conversations/{conversation}/hand-back", headers=ADMIN, json={"operator": "ann"})
    assert back.status_code == 200
    fake_openai.script_reply("Yes, we open at nine on Sundays too.")
    again = _ask(api, url, caller, "And on Sundays?")
    assert again["status"] == "completed"
    assert again["output"][0]["content"][0]["text"] == "Yes, we open at nine on Sundays too."
    prompt = fake_openai.chat_requests()[-1]["body"]["messages"]
    assert {"role": "assistant", "content": "Dogs are welcome on a lead."} in prompt  # the model sees it after


def test_asking_for_a_person_hands_an_api_conversation_off(api, fake_openai, settings):
    agent = make_agent(api)
    caller = {"Authorization": f"Bearer {key_for(api, agent['id'])}", "X-Session-ID": str(uuid.uuid4())}
    url = f"/v1/agents/{agent['id']}/versions/latest/invoke"
    asked = len(fake_openai.chat_requests())
    answer = _ask(api, url, caller, "I want to talk to a person please")
    assert answer["output"][0]["content"][0]["text"] == settings.handoff_message
    assert len(fake_openai.chat_requests()) == asked
    detail = api.get(f"/api/conversations/{_api_conversation(api)}", headers=ADMIN).json()
    assert detail["handoff"]["status"] == "waiting", detail["handoff"]


def test_an_api_turn_is_traced_with_the_stages_of_a_web_chat_turn(api, fake_openai):
    agent = make_agent(api)
    caller = {"Authorization": f"Bearer {key_for(api, agent['id'])}", "X-Session-ID": str(uuid.uuid4())}
    _ask(api, f"/v1/agents/{agent['id']}/versions/latest/invoke", caller, "How much is a tandem?")
    session = api.post("/api/chat/sessions").json()
    chat = api.post(f"/api/chat/sessions/{session['session_id']}/messages",
                    headers={"Authorization": f"Bearer {session['token']}"}, json={"text": "How much is a tandem?"})
    assert chat.status_code == 200, chat.text

    rows = api.get("/api/conversations", headers=ADMIN).json()["conversations"]
    stages = {}
    for row in rows:
        [trace] = api.get(f"/api/conversations/{row['id']}", headers=ADMIN).json()["traces"]
        stages[row["channel"]] = [s["stage"] for s in trace["stages"]]
    assert set(stages) == {"api", "webchat"}
    # The same stages; an agent's output checks (hallucination check, guardrails) are one more.
    assert [s for s in stages["api"] if s != "checks"] == stages["webchat"] and "checks" in stages["api"], stages
    assert "llm" in stages["webchat"] and "deliver" in stages["webchat"]

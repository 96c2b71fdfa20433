"""``confirm: true`` tools: the model's call is proposed to the customer, not made; a yes in the next turn
makes it once (with the proposing turn's idempotency key), a no drops it, and a second yes finds nothing."""

from __future__ import annotations

import httpx

from tests.gateway.tools.conftest import ADMIN, add_crm

PROPOSAL = ("Before I do this, please confirm: Book a table at the restaurant for a party on a day "
            "(party size: 4, day: Friday). Reply yes to go ahead, or no to cancel.")


class Chat:
    def __init__(self, client: httpx.Client) -> None:
        self.client = client
        session = client.post("/api/chat/sessions").json()
        self.path = f"/api/chat/sessions/{session['session_id']}/messages"
        self.auth = {"Authorization": f"Bearer {session['token']}"}

    def say(self, text: str) -> dict:
        answer = self.client.post(self.path, json={"text": text}, headers=self.auth)
        assert answer.status_code == 200, answer.text
        return answer.json()


def _traces(client: httpx.Client) -> dict[str, dict]:
    out = {}
    for listed in client.get("/api/conversations", headers=ADMIN).json()["conversations"]:
        for trace in client.get(f"/api/conversations/{listed['id']}", headers=ADMIN).json()["traces"]:
            out[trace["turn_id"]] = trace
    return out


def test_a_yes_books_once_and_a_no_never_does(client, mcp_server, fake_openai, tool_settings):
    add_crm(client, mcp_server.url)
    answer = client.patch(f"/v1/agents/{tool_settings.agent_id}", headers=ADMIN,
                          json={"config": {"tools": [{"name": "crm.book_table", "confirm": True}]}})
    assert answer.status_code == 200, answer.text
    fake_openai.auto_tool_call = ("crm__book_table", {"party_size": 4, "day": "Friday"})
    fake_openai.echo_tool_results = True

    chat = Chat(client)
    proposed = chat.say("Book a table for four on Friday")
    assert proposed["reply"]["text"] == PROPOSAL
    assert mcp_server.calls == []
    assert len(fake_openai.chat_requests()) == 1  # the proposal is the reply: no second model round

    fake_openai.auto_tool_call = None  # from here the model answers from what it reads
    done = chat.say("Yes, please!")
    assert [(c["tool"], c["arguments"], c["idempotency_key"]) for c in mcp_server.calls] == [
        ("book_table", {"party_size": 4, "day": "Friday"}, f"{proposed['turn_id']}:0")]
    assert done["reply"]["text"] == "From the tools: Booked: a table for 4 on Friday, reference BK-1001."
    again = chat.say("yes")
    assert len(mcp_server.calls) == 1 and again["reply"]["text"] == "echo: yes"

    other = Chat(client)
    fake_openai.auto_tool_call = ("crm__book_table", {"party_size": 4, "day": "Friday"})
    assert other.say("Book a table for four on Friday")["reply"]["text"] == PROPOSAL
    fake_openai.auto_tool_call = None
    refused = other.say("no, not yet")
    assert len(mcp_server.calls) == 1 and refused["reply"]["text"] == "echo: no, not yet"
    assert other.say("yes")["reply"]["text"] == "echo: yes" and len(mcp_server.calls) == 1

    traces = _traces(client)
    [asked] = traces[proposed["turn_id"]]["tool_calls"]
    assert asked["name"] == "crm.book_table" and asked["result"].startswith("proposed: waiting")
    [made] = traces[done["turn_id"]]["tool_calls"]
    assert made["result"] == "Booked: a table for 4 on Friday, reference BK-1001." and made["error"] is None
    [dropped] = traces[refused["turn_id"]]["tool_calls"]
    assert dropped["error"] == "proposed action dropped: the customer did not confirm it"


def test_a_proposal_in_the_web_chat_carries_yes_and_no_buttons(client, mcp_server, fake_openai, tool_settings):
    """The web chat shows a proposal's answers as buttons; a press sends the button's text, "Yes"."""
    add_crm(client, mcp_server.url)
    assert client.patch(f"/v1/agents/{tool_settings.agent_id}", headers=ADMIN, json={
        "config": {"tools": [{"name": "crm.book_table", "confirm": True}]}}).status_code == 200
    fake_openai.auto_tool_call = ("crm__book_table", {"party_size": 4, "day": "Friday"})
    fake_openai.echo_tool_results = True
    chat = Chat(client)

    proposed = chat.say("Book a table for four on Friday")
    assert proposed["reply"]["text"] == PROPOSAL and proposed["reply"]["choices"] == ["Yes", "No"]

    fake_openai.auto_tool_call = None
    pressed = chat.say(proposed["reply"]["choices"][0])
    assert len(mcp_server.calls) == 1
    assert pressed["reply"]["choices"] == []  # an answer offers no buttons

"""The full default prompt for a realistic conversation, section by section; budgets; the preview."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx

from gateway.core.models import Message, Role
from gateway.core.redis_tally import counting
from gateway.live.feeds import FeedPayload
from gateway.turn.ports import PromptInputs
from tests.inspect import read_trace

RAG = "Breakfast\nServed 7-10 in the garden room.\n\n---\n\nParking\nFree for guests."


async def _realistic(services, clock):
    attrs = services.customer_attributes
    await attrs.set("project_attributes_setting_agent_name", "Mia")
    await attrs.set("project_attributes_setting_business_name", "Harbour Hotel")
    await attrs.set("project_attributes_setting_business_instructions",
                    "Offer the sea-view upgrade when asked about rooms.")
    await attrs.set("project_attributes_setting_timezone", "Europe/Lisbon")
    await attrs.set("project_attributes_setting_business_hours", {"mon": "08:00-20:00", "sun": "closed"})
    persona = await services.store.resolve_persona("telegram:42", "Ada")
    await services.persona_attributes.set(persona.id, "conversation_meta", "name: Ada\nintent: book a room")
    await services.live.sections.inject(persona.id, "booking", "Room 12, 3 nights from 2 March")
    await services.live.data_injection.retrieve({"text": "Rooms free tonight: 3"}, clock.now() - timedelta(minutes=5))
    await services.live.feeds.put("weather", FeedPayload(text="Sunny, 18C", expires_in=3600))
    memory = []
    start = clock.now() - timedelta(minutes=3)
    for i, (role, text) in enumerate([(Role.USER, "Hi, do you have rooms?"), (Role.AGENT, "Yes, 3 tonight."),
                                      (Role.USER, "Is breakfast included?")]):
        memory.append(Message(conversation_id="c1", persona_id=persona.id, role=role, channel="telegram",
                              text=text, created_at=start + timedelta(seconds=i)))
    return persona, memory


async def test_full_default_prompt_has_every_section_in_order(services, clock):
    persona, memory = await _realistic(services, clock)
    prompt = await services.prompts.build(PromptInputs(persona.id, "telegram", memory, rag=RAG))
    system = prompt.messages[0].content
    calendar = await services.customer_attributes.get("project_attributes_private_dynamic_prompt_calendar")
    assert system == (
        "You are Mia, the AI assistant of Harbour Hotel. You talk with customers on telegram.\n"
        "Answer briefly, in the customer's language, using only the information below and the conversation so far.\n"
        "If you do not know the answer, say so and offer to connect the customer with a person.\n"
        "The current time is Tuesday 24th of February 2026, 09:00 (Europe/Lisbon).\n"
        "\n<BusinessInstructions>\nOffer the sea-view upgrade when asked about rooms.\n</BusinessInstructions>\n"
        "\n<ConversationMeta>\nname: Ada\nintent: book a room\n---\n"
        "<booking>\nRoom 12, 3 nights from 2 March\n</booking>\n---\n"
        "</ConversationMeta>\n"
        f"\n<ConvoAgentCalendar>\n{calendar}\n</ConvoAgentCalendar>\n"
        "\n<InjectedData>\n"
        '<ExternalData updated="5 minutes ago" fetched_at="2026-02-24T08:55:00+00:00">\nRooms free tonight: 3\n'
        "</ExternalData>\n\n"
        '<weather updated="just now">\nSunny, 18C\n</weather>\n'
        "</InjectedData>\n"
        '\n<AdditionalInformation alt="additional information" role="context">\n'
        f"{RAG}\n"
        "</AdditionalInformation>\n"
    )
    assert calendar.splitlines()[0] == "today Tuesday 24th of February 2026: closed"
    assert calendar.splitlines()[6] == "Monday 2nd of March 2026: open 08:00-20:00"
    assert len(calendar.splitlines()) == 45
    assert [(m.role, m.content) for m in prompt.messages[1:]] == [
        ("user", "Hi, do you have rooms?"), ("assistant", "Yes, 3 tonight."), ("user", "Is breakfast included?")]
    assert list(prompt.sections) == [
        "instructions", "conversation_meta", "custom_sections", "calendar", "injected_data", "rag", "memory", "system"]
    assert prompt.sections["rag"] == {"chars": len(RAG), "tokens": (len(RAG) + 3) // 4, "truncated": False,
                                      "cut_chars": 0}
    assert prompt.sections["memory"]["messages"] == 3


async def test_over_budget_sections_are_cut_at_a_boundary_with_a_marker_and_reported(services, clock):
    persona, memory = await _realistic(services, clock)
    services.prompts.budgets.update({"rag": 40, "memory": 8})
    rag = "\n".join(f"Fact {i}: the garden room seats forty guests." for i in range(20))
    prompt = await services.prompts.build(PromptInputs(persona.id, "telegram", memory, rag=rag))
    section = prompt.messages[0].content.split('role="context">\n')[1].split("\n</AdditionalInformation>")[0]
    kept, marker = section.rsplit("\n", 1)
    assert rag.startswith(kept) and kept.endswith("forty guests.")  # cut at a line boundary
    assert marker == f"[... cut: {len(rag) - len(kept)} more characters]"
    assert prompt.sections["rag"]["truncated"] is True
    assert prompt.sections["rag"]["cut_chars"] == len(rag) - len(kept)
    assert prompt.sections["rag"]["tokens"] <= 40
    # Memory is cut by whole messages, oldest first; the latest message always stays.
    assert [m.content for m in prompt.messages[1:]] == ["Is breakfast included?"]
    assert prompt.sections["memory"]["truncated"] is True and prompt.sections["memory"]["messages"] == 1


async def test_expired_feed_sections_disappear(services, clock):
    persona = await services.store.resolve_persona("web:expiry", None)
    await services.live.feeds.put("offer", FeedPayload(text="2 for 1 tonight", expires_in=60))
    await services.live.feeds.put("vip", FeedPayload(data={"tier": "gold"}, persona_id=persona.id))
    other = await services.store.resolve_persona("web:other", None)
    build = services.prompts.build
    system = (await build(PromptInputs(persona.id, "webchat", []))).messages[0].content
    assert '<offer updated="just now">\n2 for 1 tonight\n</offer>' in system
    assert '<vip updated="just now">\n{\n  "tier": "gold"\n}\n</vip>' in system
    assert "<vip" not in (await build(PromptInputs(other.id, "webchat", []))).messages[0].content
    clock.advance(timedelta(seconds=61))
    system = (await build(PromptInputs(persona.id, "webchat", []))).messages[0].content
    assert "<offer" not in system and '<vip updated="1 minute ago">' in system
    assert await services.redis.hkeys(services.store.key("feeds", "project")) == []


def test_preview_is_the_real_turn_path_and_matches_the_turn(admin, live_gateway, fake_openai):
    session = httpx.post(f"{live_gateway.url}/api/chat/sessions").json()
    auth = {"Authorization": f"Bearer {session['token']}"}
    path = f"{live_gateway.url}/api/chat/sessions/{session['session_id']}/messages"
    httpx.post(path, json={"text": "Do you have parking?"}, headers=auth)
    preview = admin.post("/api/prompt/preview", json={"persona_id": session["persona_id"], "text": "And breakfast?",
                                                     "channel": "webchat"})
    body = preview.json()
    assert [m["content"] for m in body["messages"][1:]] == ["Do you have parking?", "echo: Do you have parking?",
                                                           "And breakfast?"]
    assert set(body["sections"]) >= {"conversation_meta", "calendar", "injected_data", "rag", "memory"}
    assert body["sections"]["calendar"]["chars"] > 0 and body["sections"]["memory"]["messages"] == 3
    # The preview stored nothing and called no model.
    transcript = httpx.get(path, headers=auth).json()["messages"]
    assert [m["text"] for m in transcript] == ["Do you have parking?", "echo: Do you have parking?"]
    assert len(fake_openai.chat_requests()) == 1
    # A real turn sends the same system prompt and records the same section sizes.
    turn = httpx.post(path, json={"text": "And breakfast?"}, headers=auth).json()
    trace = read_trace(live_gateway.services, turn["turn_id"])
    assert trace.prompt[0].content == body["messages"][0]["content"]
    assert trace.sections == body["sections"]
    unknown = admin.post("/api/prompt/preview", json={"persona_id": "missing", "text": "x"})
    assert (unknown.status_code, unknown.json()["error"]) == (404, "not_found")
    assert admin.post("/api/prompt/preview", json={"text": ""}).status_code == 422


def test_preview_without_persona_uses_a_sample(admin):
    body = admin.post("/api/prompt/preview", json={"text": "What time is it?"}).json()
    assert body["messages"][0]["role"] == "system"
    assert "Tuesday 24th of February 2026, 09:00 (UTC)" in body["messages"][0]["content"]
    assert body["messages"][1:] == [{"role": "user", "content": "What time is it?"}]
    assert datetime(2026, 2, 24, tzinfo=UTC)  # the manual clock the gateway runs on


async def test_every_hash_the_prompt_shows_is_read_in_one_round_trip(services, clock):
    persona, memory = await _realistic(services, clock)
    await services.live.feeds.put("vip", FeedPayload(text="gold member", persona_id=persona.id))
    await services.prompts.build(PromptInputs(persona.id, "telegram", memory, rag=RAG))  # calendar built
    with counting() as tally:
        prompt = await services.prompts.build(PromptInputs(persona.id, "telegram", memory, rag=RAG))
    system = prompt.messages[0].content
    for shown in ("Offer the sea-view upgrade", "intent: book a room", "<ConvoAgentCalendar>",
                  "Rooms free tonight: 3", "Sunny, 18C", "gold member"):
        assert shown in system
    # The persona's and the project's attributes, both feed hashes and the live template in one pipeline
    # (a turn puts it in the round trip that takes its lock): before, the project's attributes were read
    # three times, each hash on its own, and the template after them.
    assert tally.round_trips == 1

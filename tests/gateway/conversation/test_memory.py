"""get_memory aggregates a persona's messages across channels, newest kept when the limit cuts."""

from __future__ import annotations

from datetime import timedelta

from gateway.core.models import Conversation, Message, Role, utcnow


async def _say(services, persona, channel, role, text, at):
    conv = Conversation(persona_id=persona.id, channel=channel)
    await services.store.add_message(
        Message(conversation_id=conv.id, persona_id=persona.id, role=role, channel=channel, text=text, created_at=at)
    )


async def test_memory_spans_channels_filters_and_cuts_from_the_oldest(services):
    persona = await services.store.resolve_persona("phone:+15550001111")
    t = utcnow() - timedelta(minutes=10)
    await _say(services, persona, "twilio_sms", Role.USER, "sms one", t)
    await _say(services, persona, "twilio_voice", Role.USER, "voice two", t + timedelta(seconds=1))
    await _say(services, persona, "twilio_voice", Role.SYSTEM, "call started", t + timedelta(seconds=2))
    await _say(services, persona, "twilio_voice", Role.AGENT, "agent three", t + timedelta(seconds=3))
    await _say(services, persona, "webchat", Role.USER, "web four", t + timedelta(seconds=4))

    memory = services.memory
    texts = [m.text for m in await memory.get_memory(persona)]
    assert texts == ["sms one", "voice two", "agent three", "web four"]
    with_system = [m.text for m in await memory.get_memory(persona, include_system=True)]
    assert with_system == ["sms one", "voice two", "call started", "agent three", "web four"]
    assert [m.text for m in await memory.get_memory(persona, count=2)] == ["agent three", "web four"]
    # 21 characters fit "agent three" (11) + "web four" (8) but not "voice two" as well.
    assert [m.text for m in await memory.get_memory(persona, max_chars=21)] == ["agent three", "web four"]
    assert [m.text for m in await memory.get_memory(persona, channels=["twilio_voice"])] == [
        "voice two", "agent three"]
    since = t + timedelta(seconds=0.5)
    until = t + timedelta(seconds=3.5)
    assert [m.text for m in await memory.get_memory(persona, since=since, until=until)] == [
        "voice two", "agent three"]


async def test_sms_and_call_from_one_number_are_one_persona(services):
    a = await services.store.resolve_persona("phone:+15550002222")
    b = await services.store.resolve_persona("phone:+15550002222")
    other = await services.store.resolve_persona("telegram:42")
    assert a.id == b.id != other.id

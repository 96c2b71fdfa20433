"""Conversation lifecycle events and what the end of a session clears."""

from __future__ import annotations

from datetime import timedelta

from gateway.core.events import ConversationEnded, ConversationStarted
from gateway.core.models import InboundMessage, new_id


def _inbound(identity="web:s1", channel="webchat"):
    return InboundMessage(channel=channel, external_user_id="u", external_message_id=new_id(),
                          identity=identity, text="hi")


async def test_started_once_then_ended_by_inactivity_which_clears_rag(services):
    seen = []

    async def record(event):
        seen.append(event)

    services.events.subscribe(ConversationStarted, record)
    services.events.subscribe(ConversationEnded, record)
    persona = await services.store.resolve_persona("web:s1")
    conv, started = await services.sessions.open(persona, _inbound())
    again, started_again = await services.sessions.open(persona, _inbound())
    assert started and not started_again and again.id == conv.id
    await services.persona_attributes.set(persona.id, "rag", "Opening hours\n9-5")
    await services.persona_attributes.set(persona.id, "conversation_meta", "name: Ada")

    # Age the conversation past the timeout, as if 31 minutes had passed.
    conv.last_activity_at -= timedelta(minutes=31)
    await services.store.save_conversation(conv)
    await services.store.redis.zadd(services.store.key("active_convs"), {conv.id: conv.last_activity_at.timestamp()})
    assert await services.sessions.end_idle() == 1
    assert await services.sessions.end_idle() == 0  # ends once

    ended = [e for e in seen if isinstance(e, ConversationEnded)]
    assert len(ended) == 1 and ended[0].reason == "timeout" and ended[0].conversation.id == conv.id
    assert await services.persona_attributes.get(persona.id, "rag") == ""
    assert await services.persona_attributes.get(persona.id, "conversation_meta") == "name: Ada"
    new_conv, started_new = await services.sessions.open(persona, _inbound())
    assert started_new and new_conv.id != conv.id
    assert [type(e).__name__ for e in seen] == ["ConversationStarted", "ConversationEnded", "ConversationStarted"]


async def test_a_message_after_the_timeout_starts_a_new_conversation(services):
    persona = await services.store.resolve_persona("web:s2")
    conv, _ = await services.sessions.open(persona, _inbound("web:s2"))
    conv.last_activity_at -= timedelta(hours=1)
    await services.store.save_conversation(conv)
    new_conv, started = await services.sessions.open(persona, _inbound("web:s2"))
    assert started and new_conv.id != conv.id
    assert (await services.store.get_conversation(conv.id)).end_reason == "timeout"


async def test_attribute_validation_refuses_and_keeps_the_old_value(services):
    import pytest

    from gateway.conversation.attributes import AttributeSpec, CustomerAttributes
    from gateway.core.errors import InvalidInput

    attributes = CustomerAttributes(services.store, {"test_max_party": AttributeSpec("test_max_party", int, 4)})
    assert await attributes.get("test_max_party") == 4
    await attributes.set("test_max_party", "6")
    with pytest.raises(InvalidInput, match="test_max_party"):
        await attributes.set("test_max_party", "six")
    assert await attributes.get("test_max_party") == 6


async def test_the_sweep_timer_ends_idle_conversations_without_a_new_message(services):
    from gateway.core.models import utcnow
    from gateway.services import IDLE_SWEEP_TIMER as SWEEP_TIMER

    persona = await services.store.resolve_persona("web:idle")
    conv, _ = await services.sessions.open(persona, _inbound("web:idle"))
    await services.persona_attributes.set(persona.id, "rag", "Opening hours\n9-5")
    await services.store.redis.zadd(services.store.key("active_convs"), {conv.id: utcnow().timestamp() - 3600})
    timers = services.live.timers
    slot = await timers.timers[SWEEP_TIMER].current(utcnow())
    assert await timers.tick(SWEEP_TIMER, slot.id) == f"fired {slot.id}"
    assert (await services.store.get_conversation(conv.id)).end_reason == "timeout"
    assert await services.persona_attributes.get(persona.id, "rag") == ""
    # The tick scheduled the next sweep on RQ's scheduler.
    following = await timers.timers[SWEEP_TIMER].following(utcnow())
    assert timers.job_id(SWEEP_TIMER, following.id) in services.queues["timers"].scheduled_job_registry

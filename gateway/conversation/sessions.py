"""Conversation lifecycle: start on first message or after inactivity, end on timeout or request."""

from __future__ import annotations

import logging
from datetime import timedelta

from gateway.conversation.attributes import PersonaAttributes
from gateway.conversation.store import RedisStore
from gateway.core.events import ConversationEnded, ConversationStarted, EventBus
from gateway.core.models import Conversation, EndReason, InboundMessage, Persona, utcnow

log = logging.getLogger(__name__)


class Sessions:
    def __init__(
        self,
        store: RedisStore,
        attributes: PersonaAttributes,
        events: EventBus,
        inactivity_timeout_s: int,
    ) -> None:
        self.store = store
        self.attributes = attributes
        self.events = events
        self.timeout = timedelta(seconds=inactivity_timeout_s)

    @property
    def activity_key(self) -> str:
        return self.store.key("active_convs")

    async def open(self, persona: Persona, inbound: InboundMessage) -> tuple[Conversation, bool]:
        """The conversation this message belongs to, and whether it was just started."""
        active = await self.store.active_conversation(persona.id, inbound.channel, inbound.thread)
        conv, started = await self.resume(persona, inbound, active)
        await self.store.save_conversation(conv, activity_key=self.activity_key, make_active=started)
        if started:
            await self.announce_start(persona, conv)
        return conv, started

    async def resume(self, persona: Persona, inbound: InboundMessage,
                     active: Conversation | None) -> tuple[Conversation, bool]:
        """``open`` given the persona's ``active`` conversation as read with other work: the conversation
        (ending ``active`` first when it went idle), and whether it starts now. Nothing is saved: the
        caller queues ``save_into`` in its round trip, then calls ``announce_start`` for a new one."""
        now = utcnow()
        conv = active
        if conv is not None and now - conv.last_activity_at > self.timeout:
            await self.end(conv, EndReason.TIMEOUT)
            conv = None
        started = conv is None
        if conv is None:
            # A conversation starts with its first message (received before it was opened).
            conv = Conversation(persona_id=persona.id, channel=inbound.channel, thread=inbound.thread,
                                connection=inbound.connection,  # conn (issue 28)
                                started_at=min(now, inbound.received_at))
        conv.last_activity_at = now
        return conv, started

    def save_into(self, pipe, conversation: Conversation, started: bool) -> None:
        self.store.save_conversation_into(pipe, conversation, activity_key=self.activity_key, make_active=started)

    async def announce_start(self, persona: Persona, conversation: Conversation) -> None:
        await self.events.publish(ConversationStarted(persona=persona, conversation=conversation))

    async def end(self, conversation: Conversation, reason: EndReason) -> bool:
        """End once; a second call (another replica, a late status callback) is a no-op."""
        if not await self.store.redis.zrem(self.activity_key, conversation.id):
            fresh = await self.store.get_conversation(conversation.id)
            if fresh is None or not fresh.active:
                return False
        conversation.ended_at = utcnow()
        conversation.end_reason = reason
        await self.store.save_conversation(conversation)
        await self.store.set_active(conversation)
        await self.attributes.clear_session_scoped(conversation.persona_id)
        await self.events.publish(
            ConversationEnded(
                persona_id=conversation.persona_id, conversation=conversation, reason=reason
            )
        )
        return True

    async def end_idle(self) -> int:
        """End every conversation idle past the timeout; run by a timer. Returns how many ended."""
        cutoff = (utcnow() - self.timeout).timestamp()
        ids = await self.store.redis.zrangebyscore(self.activity_key, "-inf", cutoff)
        ended = 0
        for raw in ids:
            conv = await self.store.get_conversation(raw.decode())
            if conv is None:
                await self.store.redis.zrem(self.activity_key, raw)
                continue
            ended += await self.end(conv, EndReason.TIMEOUT)
        return ended

"""A message with only media (a photo, a voice note, a location): recorded in the transcript as a safe
description and answered with a short text saying what the bot reads — no turn, no model call.

Shared by the messaging kinds that receive media before the media issue lands (WhatsApp through
Twilio, the Meta kinds). The description never carries a vendor URL that grants access to the file.
"""

from __future__ import annotations

from gateway.channel import (
    ChannelContext,
    ChannelDeliveryError,
    InboundMessage,
    Message,
    ReplySink,
    Role,
)

__all__ = ["MEDIA_REPLY", "answer_media", "record_media"]

MEDIA_REPLY = "I can read text messages only: please type your question."


async def record_media(context: ChannelContext, inbound: InboundMessage) -> tuple[str, str]:
    """The message goes into its conversation's transcript; answers (conversation id, persona id)."""
    store = context.store
    persona = await store.resolve_persona(inbound.identity, inbound.display_name)
    conversation, _ = await context.sessions.open(persona, inbound)
    await store.add_message(Message(
        conversation_id=conversation.id, persona_id=persona.id, role=Role.USER, channel=inbound.channel,
        text=inbound.text, external_id=inbound.external_message_id, created_at=inbound.received_at))
    return conversation.id, persona.id


async def answer_media(context: ChannelContext, sink: ReplySink, channel: str, conversation_id: str,
                       persona_id: str, text: str = MEDIA_REPLY) -> None:
    """Send ``text`` (``MEDIA_REPLY``: the bot reads text only) and store it with its delivery outcome; a failed
    send raises (the inbox retries)."""
    report = await sink.deliver(text)
    await context.store.add_message(Message(
        conversation_id=conversation_id, persona_id=persona_id, role=Role.AGENT, channel=channel, text=text,
        delivery="delivered" if report.delivered else "failed", delivery_error=report.error))
    if not report.delivered:
        raise ChannelDeliveryError(report.error or f"{channel} send failed")

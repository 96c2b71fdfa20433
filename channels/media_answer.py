"""A message with media the bot does not use (a location, a sticker; a photo for an agent that cannot see,
a voice note past the caps): recorded in the transcript as a safe description and answered with a short
text — no turn, no model call. ``media_turn_work`` is what a channel does with the gateway's media
service's outcome (issue 44): the turn it made, or such an answer.

Used by every messaging kind for media it does not read (Teams, Messenger and Instagram: all of theirs). The
description never carries a vendor URL that grants access to the file.
"""

from __future__ import annotations

from gateway.channel import (
    ChannelContext,
    ChannelDeliveryError,
    InboundMessage,
    Message,
    Refused,
    ReplySink,
    Role,
    SendWork,
    Turn,
    TurnWork,
    Work,
)

__all__ = ["MEDIA_REPLY", "answer_media", "media_turn_work", "record_media"]

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


async def media_turn_work(context: ChannelContext, outcome: Turn | Refused | None, sink: ReplySink, channel: str,
                          claim: tuple[str, str], what: str) -> Work | None:
    """The turn the media service made, or its polite answer recorded and sent once (``claim``: the kind and
    id of the vendor's message, claimed so a redelivery answers nothing)."""
    if outcome is None:
        return None
    if not isinstance(outcome, Refused):
        return TurnWork(outcome, sink)
    if not await context.store.claim_once(claim[0], channel, claim[1]):
        context.metrics.duplicates.labels(channel).inc()
        return None
    where = await record_media(context, outcome.inbound)
    return SendWork(lambda: answer_media(context, sink, channel, *where, text=outcome.answer), what=what)

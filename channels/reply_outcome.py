"""A vendor's later word on a reply already sent (a status callback): written to its turn and message.

A sink that sends a reply remembers, per vendor message id and within its connection, which turn
(or which stored message, for an operator's send) it belongs to; a status callback signed by that
connection then finds it here. Another connection cannot mark this one's replies: a vendor message
id is no secret (it is in every callback and log), the connection is.
"""

from __future__ import annotations

from gateway.channel import ChannelContext, Message

__all__ = ["SENT_TTL_S", "mark_reply", "remember_sent"]

SENT_TTL_S = 3 * 24 * 3600  # how long a reply's status can still be matched to its turn


def sent_key(context: ChannelContext, channel: str, connection_id: str, message_id: str) -> str:
    return context.store.key(channel, "sent", connection_id, message_id)


async def remember_sent(context: ChannelContext, channel: str, connection_id: str, message_id: str, *,
                        turn_id: str | None = None, stored_message_id: str | None = None) -> None:
    owner = f"turn:{turn_id}" if turn_id else f"message:{stored_message_id}" if stored_message_id else None
    if owner is not None and message_id:
        await context.store.redis.set(sent_key(context, channel, connection_id, message_id), owner, ex=SENT_TTL_S)


async def mark_reply(context: ChannelContext, channel: str, connection_id: str, message_id: str, *,
                     error: str | None) -> bool:
    """The reply sent as ``message_id``: failed with ``error``, or delivered (``error`` None: it reached the
    customer, so a pending or uncertain outcome is settled). False when no reply of this connection is known
    by that id."""
    store = context.store
    owner = await store.redis.get(sent_key(context, channel, connection_id, message_id))
    if owner is None:
        return False
    what, _, ident = owner.decode().rpartition(":")
    what = what or "turn"  # written before operator sends were remembered: a bare turn id
    message_id_stored = ident
    if what == "turn":
        trace = await store.get_trace(ident)
        if trace is None:
            return False
        if error is not None:
            trace.delivery_error = error
            await store.save_trace(trace)
        message_id_stored = trace.agent_message_id or ""
    message = await store.get_message(message_id_stored) if message_id_stored else None
    if message is None:
        return what == "turn"
    if error is not None:
        update = {"delivery": "failed", "delivery_error": error}
    elif message.delivery is not None and message.delivery.value in ("pending", "uncertain"):
        update = {"delivery": "delivered"}
    else:
        return True
    await store.update_message(Message.model_validate({**message.model_dump(), **update}))
    return True

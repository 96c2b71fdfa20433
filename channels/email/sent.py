"""The Message-IDs a connection sent, each with the thread it answered (kept 90 days in Redis).

A mail that comes back under one of them is our own (a loop, a copy to ourselves) and never
answered; a customer's reply naming one of them in ``In-Reply-To`` belongs to that thread even when
their client dropped ``References``.
"""

from __future__ import annotations

from gateway.channel import ChannelContext

__all__ = ["remember_sent", "sent_thread"]

KEEP_S = 90 * 24 * 3600


def _key(context: ChannelContext, connection_id: str, message_id: str) -> str:
    return context.store.key("email", connection_id, "sent", message_id)


async def remember_sent(context: ChannelContext, connection_id: str, message_id: str, thread: str) -> None:
    await context.store.redis.set(_key(context, connection_id, message_id), thread, ex=KEEP_S)


async def sent_thread(context: ChannelContext, connection_id: str, message_id: str | None) -> str | None:
    """The thread our mail ``message_id`` answered; None when we did not send it."""
    if not message_id:
        return None
    found = await context.store.redis.get(_key(context, connection_id, message_id))
    return found.decode() if isinstance(found, bytes) else found

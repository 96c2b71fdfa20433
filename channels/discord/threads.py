"""Where a Discord message is answered, and which conversation it belongs to.

A direct message: in its DM channel (one conversation per DM). A message in a thread (one the bot opened,
or any thread it was mentioned in): in that thread (one conversation per thread). A mention or a reply in
a server channel: in a thread the bot opens on the message, so a busy channel is not flooded; Discord gives
a thread opened on a message the message's id, so the conversation is known before the thread exists.
The threads the bot opened are remembered in Redis: everything said in them is for the bot.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from channels.discord.payloads import THREAD_CHANNEL_TYPES, Received
from channels.discord.rest import DiscordRefused, DiscordREST
from gateway.channel import ChannelContext, Connection

__all__ = ["Place", "Threads"]

log = logging.getLogger(__name__)

THREAD_EXISTS = 160004  # "A thread has already been created for this message"
OURS_TTL_S = 30 * 24 * 3600
ARCHIVE_AFTER_MIN = 1440


@dataclass(frozen=True)
class Place:
    conversation: str  # the thread of the conversation (a DM channel, a thread id)
    channel_id: str  # where replies are posted (once the thread is opened, for ``open_on``)
    open_on: str | None = None  # a message in ``parent`` to open a thread on first
    parent: str | None = None
    name: str = ""


class Threads:
    def __init__(self, context: ChannelContext, rest: DiscordREST) -> None:
        self.context, self.rest = context, rest

    def _key(self, connection: Connection, channel_id: str) -> str:
        return self.context.store.key("discord", "thread", connection.id, channel_id)

    async def ours(self, connection: Connection, channel_id: str) -> bool:
        return bool(await self.context.store.redis.exists(self._key(connection, channel_id)))

    async def place(self, received: Received, connection: Connection) -> Place:
        if received.direct or received.interaction_token is not None:
            return Place(received.channel_id, received.channel_id)
        if await self.ours(connection, received.channel_id):
            return Place(received.channel_id, received.channel_id)
        channel = await self.rest.call("GET", f"/channels/{received.channel_id}", connection.secret("bot_token"),
                                       what="channel")
        if (channel or {}).get("type") in THREAD_CHANNEL_TYPES:
            return Place(received.channel_id, received.channel_id)
        name = " ".join(received.text.split())[:90] or f"Question from {received.author_name or 'a member'}"
        return Place(received.message_id, received.message_id, open_on=received.message_id,
                     parent=received.channel_id, name=name)

    async def opened(self, place: Place, connection: Connection) -> str:
        """The channel to post in: the thread opened on the message first, where the place asks for one."""
        if place.open_on is None or await self.ours(connection, place.channel_id):
            return place.channel_id
        try:
            thread = await self.rest.call(
                "POST", f"/channels/{place.parent}/messages/{place.open_on}/threads", connection.secret("bot_token"),
                json={"name": place.name, "auto_archive_duration": ARCHIVE_AFTER_MIN}, what="start thread")
            thread_id = str(thread["id"])
        except DiscordRefused as exc:
            if exc.code != THREAD_EXISTS:  # no right to open threads there: answered in the channel itself
                log.warning("discord connection %s: no thread opened (%s); answering in the channel", connection.id,
                            exc.message)
                return place.parent or place.channel_id
            thread_id = place.open_on  # opened by an earlier try of this reply
        await self.context.store.redis.set(self._key(connection, thread_id), "1", ex=OURS_TTL_S)
        return thread_id

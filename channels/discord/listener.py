"""A Discord bot's Gateway connection, held by one replica (``ConnectionListeners``): its messages for the
bot go into the inbox, each once (the inbox's dedup id is Discord's message id, so a resume's replay of a
message queued already is dropped there)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.discord.payloads import addressed, queued_message
from channels.discord.rest import DiscordREST
from channels.discord.session import GatewayRefused, GatewaySession, ResumeState
from channels.discord.threads import Threads
from channels.errors import ChannelRejected
from channels.masking import vendor_boundary
from gateway.channel import ChannelContext, Connection, delivery_id, order_key

__all__ = ["GatewayListener"]

log = logging.getLogger(__name__)
REFUSED_PAUSE_S = 60.0  # a refused bot is tried again after this (the operator may have fixed it)


class GatewayListener:
    def __init__(self, context: ChannelContext, rest: DiscordREST, threads: Threads) -> None:
        self.context, self.rest, self.threads = context, rest, threads

    def state(self, connection: Connection) -> ResumeState:
        store = self.context.store
        return ResumeState(store.redis, store.key("discord", "gateway", connection.id))

    async def _url(self, token: str) -> str:
        configured = self.context.settings.discord_gateway_url
        if configured:
            return configured
        return str((await self.rest.call("GET", "/gateway/bot", token, what="gateway/bot"))["url"])

    async def listen(self, connection: Connection) -> None:
        async with vendor_boundary(connection):  # the bot token masked in what is logged or raised from here
            await self._listen(connection)

    async def _listen(self, connection: Connection) -> None:
        token = connection.secret("bot_token")

        async def on_message(message: dict[str, Any], bot_id: str) -> None:
            await self._message(connection, message, bot_id)

        try:
            session = GatewaySession(await self._url(token), token, self.state(connection), on_message)
            await session.run()
        except (GatewayRefused, ChannelRejected) as exc:  # not a passing fault: said, and tried again much later
            error = exc.message if isinstance(exc, ChannelRejected) else str(exc)
            log.warning("discord connection %s: %s", connection.id, error)
            if self.context.connections is not None:
                await self.context.connections.note_error(connection, error)
            await asyncio.sleep(REFUSED_PAUSE_S)
            raise

    async def _message(self, connection: Connection, message: dict[str, Any], bot_id: str) -> None:
        channel = str(message.get("channel_id", ""))
        ours = message.get("guild_id") is not None and await self.threads.ours(connection, channel)
        if not addressed(message, bot_id, our_thread=ours):
            return
        await self.context.ack_delivery("discord", delivery_id(connection.id, str(message["id"])),
                                        order_key(connection.id, channel), queued_message(message))

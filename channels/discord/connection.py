"""Discord connections (kind ``discord``): a bot's messages through the Gateway, ``/ask`` over HTTP.

The bot's Gateway WebSocket is held by one replica at a time (``ConnectionListeners`` behind a Redis
lease; another replica takes over and resumes when the holder dies); direct messages, mentions and
replies to the bot go into the inbox. The Interactions endpoint (``webhook_url``, pasted into the
developer portal) takes ``/ask``. Verifying a connection asks ``GET /users/@me`` with the bot token (a
refusal is a 422 with Discord's message, nothing stored) and registers ``/ask`` for the application.
"""

from __future__ import annotations

from fastapi import Request, Response

from channels.connection_capabilities import DISCORD
from channels.discord import interactions
from channels.discord.listener import GatewayListener
from channels.discord.payloads import Received, ask_command, received
from channels.discord.rest import DiscordREST
from channels.discord.sender import ChannelSink, InteractionSink
from channels.discord.threads import Place, Threads
from channels.errors import ChannelRateLimited, ChannelRejected, ChannelUnavailable
from channels.listeners import ConnectionListeners
from channels.outbound_retry import RetryPolicy
from gateway.channel import (
    ChannelContext,
    Connection,
    CredentialsRefused,
    Delivery,
    InboundMessage,
    ReplySink,
    TurnWork,
    VendorUnreachable,
    Work,
    scoped,
)

__all__ = ["DiscordConnections", "build_connections"]

CHANNEL = "discord"


class DiscordConnections:
    capabilities = DISCORD

    def __init__(self, context: ChannelContext) -> None:
        self.context = context
        self.policy = RetryPolicy.from_settings(context.settings)
        self.rest = DiscordREST(context.settings)
        self.threads = Threads(context, self.rest)
        self.gateway = GatewayListener(context, self.rest, self.threads)
        self.listeners = ConnectionListeners(context, "discord", self.gateway.listen,
                                             lease_s=context.settings.discord_gateway_lease_s)

    async def stop(self) -> None:
        await self.listeners.stop()
        await self.rest.close()

    # -- inbound -------------------------------------------------------------------------------
    async def webhook(self, request: Request, connection: Connection) -> Response:
        interaction = await interactions.signed(request, self.context, connection)
        return await interactions.answer(interaction, self.context, connection)

    async def accept(self, delivery: Delivery, connection: Connection) -> Work | None:
        message = received(delivery.body)
        if not message.text:
            return None
        place = await self.threads.place(message, connection)
        inbound = InboundMessage(channel=CHANNEL, external_user_id=message.author_id,
                                 external_message_id=message.message_id, identity=f"discord:{message.author_id}",
                                 text=message.text, display_name=message.author_name, thread=place.conversation)
        turn = await self.context.pipeline.accept(scoped(inbound, connection), delivery_id=delivery.id)
        if turn is None:
            return None
        return TurnWork(turn, self._sink(message, connection, place))

    def _sink(self, message: Received, connection: Connection, place: Place | None) -> ReplySink:
        if message.interaction_token is not None:
            return InteractionSink(self.rest, message, self.policy, DISCORD, self.context, connection)
        return ChannelSink(self.rest, message, self.policy, DISCORD, self.context, connection, self.threads, place)

    def sink_for(self, delivery: Delivery, connection: Connection) -> ReplySink:
        return self._sink(received(delivery.body), connection, None)

    # -- the vendor check ----------------------------------------------------------------------
    async def verify(self, connection: Connection, webhook_url: str) -> str | None:
        token = connection.secret("bot_token")
        try:
            me = await self.rest.call("GET", "/users/@me", token, what="users/@me")
        except ChannelRejected as exc:
            raise CredentialsRefused(f"credentials.bot_token: Discord refused the token: {exc.message}") from None
        except (ChannelUnavailable, ChannelRateLimited) as exc:
            raise VendorUnreachable(exc.message) from exc
        try:
            await self.rest.call("PUT", f"/applications/{connection.secret('application_id')}/commands", token,
                                 json=[ask_command()], what="register /ask")
        except ChannelRejected as exc:
            raise CredentialsRefused(f"credentials.application_id: Discord refused to register /ask for this "
                                     f"application: {exc.message}") from None
        except (ChannelUnavailable, ChannelRateLimited) as exc:
            raise VendorUnreachable(exc.message) from exc
        return "@" + str(me.get("username") or me.get("id"))

    async def forget(self, connection: Connection) -> None:
        await self.gateway.state(connection).clear()  # its Gateway session; the bot stays the operator's


def build_connections(context: ChannelContext) -> DiscordConnections:
    handler = DiscordConnections(context)
    handler.listeners.start()
    return handler

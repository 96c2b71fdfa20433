"""A Discord reply: rendered in Discord's markdown, split at 2,000 characters, sent part by part.

A message's reply goes to its channel (a thread opened on it first, ``Threads.opened``), with typing shown
while the model thinks. An ``/ask``'s reply is the interaction's: the deferred "thinking…" message is
edited into the first part (``PATCH /webhooks/{application}/{token}/messages/@original``), each further
part a follow-up. Mentions in a reply never ping anyone (``allowed_mentions``).
"""

from __future__ import annotations

from channels.connections import note_delivery
from channels.delivery import deliver_parts
from channels.discord.payloads import Received
from channels.discord.rest import DiscordREST
from channels.discord.threads import Place, Threads
from channels.outbound_retry import RetryPolicy
from channels.render import render
from gateway.channel import Capabilities, ChannelContext, Connection, DeliveryReport

__all__ = ["ChannelSink", "InteractionSink"]

NO_PINGS = {"parse": []}


class _Sink:
    streaming = False
    channel = "discord"  # the delivery-failure metric's label

    def __init__(self, rest: DiscordREST, received: Received, policy: RetryPolicy, capabilities: Capabilities,
                 context: ChannelContext, connection: Connection) -> None:
        self.rest, self.received, self.policy, self.capabilities = rest, received, policy, capabilities
        self.context, self.connection = context, connection

    async def delta(self, text: str) -> None:  # pragma: no cover - not streaming
        raise NotImplementedError

    async def _part(self, part: str) -> str:
        raise NotImplementedError

    async def deliver(self, text: str) -> DeliveryReport:
        report = await deliver_parts(render(text, self.capabilities), self._part, self.policy, what="discord")
        return await note_delivery(self.context, self.connection, report)


class ChannelSink(_Sink):
    """A Gateway message's reply, in its DM, its thread, or the thread opened on it."""

    typing_interval_s = 8.0  # Discord shows "is typing…" for about 10 s

    def __init__(self, rest: DiscordREST, received: Received, policy: RetryPolicy, capabilities: Capabilities,
                 context: ChannelContext, connection: Connection, threads: Threads, place: Place | None) -> None:
        super().__init__(rest, received, policy, capabilities, context, connection)
        self.threads, self.place = threads, place
        self._channel: str | None = None

    async def _target(self) -> str:
        if self._channel is None:
            place = self.place or await self.threads.place(self.received, self.connection)
            self._channel = await self.threads.opened(place, self.connection)
        return self._channel

    @property
    def _token(self) -> str:
        return self.connection.secret("bot_token")

    async def typing(self) -> None:
        await self.rest.call("POST", f"/channels/{await self._target()}/typing", self._token, what="typing")

    async def _part(self, part: str) -> str:
        sent = await self.rest.call("POST", f"/channels/{await self._target()}/messages", self._token,
                                    json={"content": part, "allowed_mentions": NO_PINGS}, what="create message")
        return str(sent["id"])


class InteractionSink(_Sink):
    """An ``/ask``'s reply: the deferred response edited, then follow-ups (no bot token: the interaction's)."""

    _edited = False

    async def _part(self, part: str) -> str:
        hook = f"/webhooks/{self.connection.secret('application_id')}/{self.received.interaction_token}"
        body = {"content": part, "allowed_mentions": NO_PINGS}
        if not self._edited:
            sent = await self.rest.call("PATCH", f"{hook}/messages/@original", None, json=body,
                                        what="edit original response")
            self._edited = True  # only once it went out: a retried first part edits again
        else:
            sent = await self.rest.call("POST", hook, None, json=body, what="follow-up message")
        return str(sent["id"])

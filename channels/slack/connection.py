"""Slack apps added as connections: one bolt app per connection, its own signing secret and token.

``/channels/slack/{id}/events`` is the app's Event Subscriptions Request URL; events are checked with
the connection's signing secret and queued like the environment app's, within the connection.
Verifying calls ``auth.test`` with the bot token. Nothing is undone at Slack on delete (the Request
URL is the operator's to change in the app's settings).
"""

from __future__ import annotations

from fastapi import Request, Response
from slack_sdk.web.async_client import AsyncWebClient

from channels.connections import note_delivery
from channels.slack.adapter import CAPABILITIES, SlackAdapter, SlackSink
from channels.slack.check import SlackCheck
from gateway.channel import ChannelContext, Connection, Delivery, DeliveryReport, TurnWork

__all__ = ["SlackConnections", "build_connections"]


class ConnectionSlackSink(SlackSink):
    def __init__(self, inner: SlackSink, context: ChannelContext, connection: Connection) -> None:
        super().__init__(inner.client, inner.channel_id, inner.thread_ts, inner.policy, inner.buttons)
        self.context, self.connection = context, connection

    async def deliver(self, text: str) -> DeliveryReport:
        return await note_delivery(self.context, self.connection, await super().deliver(text))

    async def deliver_rated(self, text: str, message_id: str) -> DeliveryReport:
        if not self.buttons:
            return await self.deliver(text)
        return await note_delivery(self.context, self.connection, await super().deliver_rated(text, message_id))


class SlackConnections:
    capabilities = CAPABILITIES

    def __init__(self, context: ChannelContext) -> None:
        self.context = context
        self.check = SlackCheck(context)
        self._apps: dict[str, tuple[tuple[str, str], SlackAdapter]] = {}

    def app(self, connection: Connection) -> SlackAdapter:
        credentials = (connection.secret("bot_token"), connection.secret("signing_secret"))
        known = self._apps.get(connection.id)
        if known is None or known[0] != credentials or known[1].connection != connection:
            client = AsyncWebClient(token=credentials[0], base_url=self.context.settings.slack_api_base)
            known = (credentials, SlackAdapter(self.context, client, credentials[1], connection))
            self._apps[connection.id] = known
        return known[1]

    async def stop(self) -> None:
        for _, app in self._apps.values():
            await app.stop()

    async def webhook(self, request: Request, connection: Connection) -> Response:
        return await self.app(connection).events(request)

    async def accept(self, delivery: Delivery, connection: Connection) -> TurnWork | None:
        work = await self.app(connection).accept(delivery)
        if work is None:
            return None
        return TurnWork(work.turn, ConnectionSlackSink(work.sink, self.context, connection))

    def sink_for(self, delivery: Delivery, connection: Connection) -> ConnectionSlackSink:
        return ConnectionSlackSink(self.app(connection).sink_for(delivery), self.context, connection)

    async def verify(self, connection: Connection, webhook_url: str) -> str | None:
        return await self.check.verify(connection, webhook_url)

    async def forget(self, connection: Connection) -> None:
        return None


def build_connections(context: ChannelContext) -> SlackConnections:
    return SlackConnections(context)

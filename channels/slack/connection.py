"""Slack apps added as connections: one bolt app per connection, its own signing secret and token.

``/channels/slack/{id}/events`` is the app's Event Subscriptions Request URL; events are checked with
the connection's signing secret and queued like the environment app's, within the connection.
Verifying calls ``auth.test`` with the bot token. Nothing is undone at Slack on delete (the Request
URL is the operator's to change in the app's settings).
"""

from __future__ import annotations

from fastapi import Request, Response
from slack_sdk.web.async_client import AsyncWebClient

from channels.connections import NotedRatedSink
from channels.slack.adapter import CAPABILITIES, SlackAdapter, SlackSink
from channels.slack.check import SlackCheck
from gateway.channel import ChannelContext, Connection, Delivery, TurnWork

__all__ = ["SlackConnections", "build_connections"]


class ConnectionSlackSink(NotedRatedSink, SlackSink):
    def __init__(self, inner: SlackSink, context: ChannelContext, connection: Connection) -> None:
        super().__init__(inner.client, inner.channel_id, inner.thread_ts, inner.policy, inner.buttons)
        self.context, self.connection = context, connection


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

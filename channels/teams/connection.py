"""Microsoft Teams connections (kind ``teams``): an Azure bot registration, answered as the connection's agent.

The Bot Connector posts activities to ``/channels/teams/{id}/messages``. Every request's token is
checked first (``auth.ActivityTokens``): missing, forged, expired or for another bot is a 401 and
nothing is queued. A message to answer (a personal or group chat, a channel message that @mentions
the bot) is queued under its activity id, so a redelivery is answered once, in the order of its
Teams conversation; everything else (conversation updates, reactions, channel chatter) is
acknowledged and dropped. So is an activity from another of the bot's Bot Framework channels
(``channelId`` not ``msteams``: the Azure portal's "Test in Web Chat", Direct Line, the Emulator): it is
not a Teams message, so it is counted as refused, logged and not answered under the ``teams`` name.
One conversation per Teams conversation id (a channel's reply thread is its own). Verifying a
connection asks the token URL for the app's token; a refusal is a 422 with Microsoft's reason and
nothing stored. Nothing is undone at Microsoft on delete: the messaging endpoint is the operator's to
remove from the bot registration.
"""

from __future__ import annotations

import logging

import httpx
from fastapi import Request, Response
from fastapi.responses import JSONResponse

from channels.connection_capabilities import TEAMS
from channels.delivery import reject_unverified
from channels.errors import ChannelRateLimited, ChannelUnavailable
from channels.masking import MaskedSink
from channels.media_answer import answer_media, record_media
from channels.outbound_retry import RetryPolicy
from channels.teams.activity import Activity, parse_activity, queued_activity
from channels.teams.auth import ActivityTokens, TokenRefused
from channels.teams.connector import Connector, TokenRefusedByMicrosoft, Where
from channels.teams.sender import TeamsSink
from gateway.channel import (
    ChannelContext,
    Connection,
    CredentialsRefused,
    Delivery,
    InboundMessage,
    SendWork,
    TurnWork,
    VendorUnreachable,
    Work,
    delivery_id,
    order_key,
    scoped,
)

__all__ = ["CHANNEL", "TeamsConnections", "build_connections"]

log = logging.getLogger(__name__)
CHANNEL = "teams"
TEAMS_CHANNEL_ID = "msteams"  # an activity's channelId from Teams; the bot's other channels are not answered


class TeamsConnections:
    def __init__(self, context: ChannelContext) -> None:
        self.context = context
        self.capabilities = TEAMS
        self.policy = RetryPolicy.from_settings(context.settings)
        self.connector = Connector(context.settings)
        self._keys_http = httpx.AsyncClient(timeout=10)
        self.tokens = ActivityTokens(context.settings.teams_openid_metadata_url, self._keys_http)

    async def stop(self) -> None:
        await self.connector.close()
        await self._keys_http.aclose()

    # -- inbound -------------------------------------------------------------------------------
    async def webhook(self, request: Request, connection: Connection) -> Response:
        authorization = request.headers.get("Authorization", "")
        if not authorization:
            reject_unverified(self.context, CHANNEL, "no Bot Framework token (Authorization: Bearer)")
        activity = parse_activity(await request.body())
        try:
            await self.tokens.check(authorization, app_id=connection.secret("app_id"),
                                    service_url=activity.service_url, channel_id=activity.channel_id)
        except TokenRefused as exc:
            log.info("teams connection %s: activity refused: %s", connection.id, exc)
            reject_unverified(self.context, CHANNEL, f"Bot Framework token refused: {exc}")
        if activity.channel_id != TEAMS_CHANNEL_ID:
            # Another Bot Framework channel of the same bot (the Azure portal's "Test in Web Chat", Direct
            # Line, Slack...): a 200, so the connector does not retry, but it is not a Teams message.
            log.info("teams connection %s: activity from Bot Framework channel %r dropped (only %r is answered)",
                     connection.id, activity.channel_id, TEAMS_CHANNEL_ID)
            self.context.metrics.rejected.labels(CHANNEL, "bot_framework_channel").inc()
            return JSONResponse({})
        if activity.answerable:
            assert activity.conversation is not None
            await self.context.ack_delivery(CHANNEL, delivery_id(connection.id, message_id(activity)),
                                            order_key(connection.id, activity.conversation.id),
                                            activity.model_dump_json(by_alias=True, exclude_none=True))
        return JSONResponse({})

    async def accept(self, delivery: Delivery, connection: Connection) -> Work | None:
        activity = queued_activity(delivery.body)
        text, media = activity.said(), activity.media()
        if not text and not media:
            log.info("teams delivery %s carried nothing to answer", delivery.dedup_id)
            return None
        assert activity.id is not None and activity.sender is not None and activity.conversation is not None
        inbound = scoped(InboundMessage(
            channel=CHANNEL, external_user_id=activity.sender.id, external_message_id=message_id(activity),
            identity=f"teams:{activity.sender.id}", text=text or "\n".join(media), thread=activity.conversation.id,
            display_name=activity.sender.name), connection)
        sink = self._sink(activity, connection)
        if text:
            turn = await self.context.pipeline.accept(inbound, delivery_id=delivery.id)
            return None if turn is None else TurnWork(turn, sink)
        if not await self.context.store.claim_once("msg", CHANNEL, delivery.dedup_id):
            return None
        where = await record_media(self.context, inbound)
        masked = MaskedSink.of(sink, connection, self.context)  # its delivery error is stored by answer_media
        return SendWork(lambda: answer_media(self.context, masked, CHANNEL, *where),
                        what=f"teams media answer ({connection.id})")

    def _sink(self, activity: Activity, connection: Connection) -> TeamsSink:
        assert activity.conversation is not None
        where = Where(activity.service_url, activity.conversation.id, activity.id,
                      bot_id=activity.recipient.id if activity.recipient else None,
                      user_id=activity.sender.id if activity.sender else None)
        return TeamsSink(self.connector, where, self.policy, self.context, connection)

    def sink_for(self, delivery: Delivery, connection: Connection) -> TeamsSink:
        return self._sink(queued_activity(delivery.body), connection)

    # -- the vendor check ----------------------------------------------------------------------
    async def verify(self, connection: Connection, webhook_url: str) -> str | None:
        try:
            await self.connector.fresh_token(connection)
        except TokenRefusedByMicrosoft as exc:
            raise CredentialsRefused(f"credentials.app_password: Microsoft refused the app id or password: "
                                     f"{exc.message}") from None
        except (ChannelUnavailable, ChannelRateLimited) as exc:
            raise VendorUnreachable(exc.message) from exc
        return None

    async def forget(self, connection: Connection) -> None:
        return None  # the messaging endpoint was set in Azure by the operator; nothing to undo


def message_id(activity: Activity) -> str:
    """An activity's id within its conversation: Teams numbers messages by time, so two chats' ids can meet."""
    assert activity.id is not None and activity.conversation is not None
    return f"{activity.conversation.id}|{activity.id}"


def build_connections(context: ChannelContext) -> TeamsConnections:
    return TeamsConnections(context)

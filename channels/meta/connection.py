"""Meta connections (``whatsapp_cloud``, ``messenger``, ``instagram``): one handler shape, a ``Platform`` each.

The webhook answers Meta's ``GET`` subscription check with the connection's verify token and takes
``POST`` deliveries signed with the connection's app secret: every message in a delivery is its own
inbox item (deduplicated by Meta's message id, ordered per customer), every status is applied to the
reply it names at once. Verifying a connection asks ``GET /{account id}`` with the token (a refusal
is a 422 with Meta's message, nothing stored). Nothing is undone at Meta on delete: the webhook is
the operator's to remove from the app.
"""

from __future__ import annotations

import logging

from fastapi import Request, Response

from channels.errors import ChannelRateLimited, ChannelRejected, ChannelUnavailable
from channels.masking import MaskedSink
from channels.media_answer import answer_media, media_turn_work, record_media
from channels.meta.graph import Graph
from channels.meta.media import media_sources
from channels.meta.platform import Platform, Received
from channels.meta.sender import OUTSIDE_WINDOW, MetaSink, refusal_noted, refused_outside_window
from channels.meta.webhook import Incoming, StatusUpdate, challenge, signed_body
from channels.outbound_retry import RetryPolicy
from channels.reply_outcome import mark_reply
from gateway.channel import (
    ChannelContext,
    Connection,
    CredentialsRefused,
    Delivery,
    InboundMessage,
    MediaSource,
    SendWork,
    Turn,
    TurnWork,
    VendorUnreachable,
    Work,
    delivery_id,
    order_key,
    scoped,
)

__all__ = ["MetaConnections"]

log = logging.getLogger(__name__)


class MetaConnections:
    def __init__(self, context: ChannelContext, platform: Platform) -> None:
        self.context, self.platform = context, platform
        self.capabilities = platform.capabilities
        self.policy = RetryPolicy.from_settings(context.settings)
        self.graph = Graph(context.settings)

    async def stop(self) -> None:
        await self.graph.close()

    # -- inbound -------------------------------------------------------------------------------
    async def webhook(self, request: Request, connection: Connection) -> Response:
        channel = self.platform.channel
        if request.method == "GET":
            return challenge(request, self.context, channel, connection.secret("verify_token"))
        body = await signed_body(request, self.context, channel, connection.secret("app_secret"))
        for item in self.platform.split(body, connection.secret(self.platform.id_field)):
            if isinstance(item, Incoming):
                await self.context.ack_delivery(channel, delivery_id(connection.id, item.vendor_id),
                                                order_key(connection.id, item.chat), item.body)
            else:
                await self._status(item, connection)
        return Response(b"EVENT_RECEIVED", media_type="text/plain")

    async def _status(self, status: StatusUpdate, connection: Connection) -> None:
        if status.status not in ("delivered", "read", "failed"):
            return  # "sent": Meta has it; the reply is stored as delivered already
        error = None
        if status.status == "failed":
            error = (refused_outside_window() if status.code == OUTSIDE_WINDOW
                     else f"{self.platform.kind} did not deliver the message: Meta {status.error or 'failed'}")
            if self.context.connections is not None:
                await self.context.connections.note_error(connection, error)
            if status.code == OUTSIDE_WINDOW:
                await refusal_noted(self.context, connection)
        known = await mark_reply(self.context, self.platform.channel, connection.id, status.message_id, error=error)
        if not known and error is not None:
            log.warning("%s connection %s: a message was refused (%s) but it is not known here",
                        self.platform.kind, connection.id, status.code)

    def _inbound(self, received: Received, text: str) -> InboundMessage:
        return InboundMessage(
            channel=self.platform.channel, external_user_id=received.sender, external_message_id=received.message_id,
            identity=self.platform.identity(received.sender), text=text, display_name=received.name,
            attachments=received.media)

    async def accept(self, delivery: Delivery, connection: Connection) -> Work | None:
        received = self.platform.received(delivery)
        sink = self._sink(received, connection)
        if self.context.media is not None and self.platform.kind == "whatsapp_cloud":
            sources = media_sources(self.graph, connection.secret(self.platform.token_field), received.media)
            if sources:  # a voice note, photo or document (issue 44): the media service makes it a turn
                return await self._media(received, sources, delivery, connection, sink)
        if received.text:
            turn = await self.context.pipeline.accept(scoped(self._inbound(received, received.text), connection),
                                                      delivery_id=delivery.id)
            if turn is None:
                return None
            sink.turn_id = turn.trace.turn_id
            return TurnWork(turn, sink)
        if not await self.context.store.claim_once("msg", self.platform.channel, delivery.dedup_id):
            return None
        where = await record_media(self.context, scoped(self._inbound(received, received.described()), connection))
        masked = MaskedSink.of(sink, connection, self.context)  # its delivery error is stored by answer_media
        return SendWork(lambda: answer_media(self.context, masked, self.platform.channel, *where),
                        what=f"{self.platform.kind} media answer ({connection.id})")

    async def _media(self, received: Received, sources: list[MediaSource], delivery: Delivery, connection: Connection,
                     sink: MetaSink) -> Work | None:
        assert self.context.media is not None
        inbound = scoped(self._inbound(received, received.text), connection)
        outcome = await self.context.media.accept(inbound, sources, delivery_id=delivery.id)
        if isinstance(outcome, Turn):
            sink.turn_id = outcome.trace.turn_id
        return await media_turn_work(self.context, outcome, MaskedSink.of(sink, connection, self.context),
                                     self.platform.channel, ("msg", delivery.dedup_id),
                                     f"{self.platform.kind} media answer ({connection.id})")

    def _sink(self, received: Received, connection: Connection) -> MetaSink:
        return MetaSink(self.graph, self.platform, received, self.policy, self.context, connection)

    def sink_for(self, delivery: Delivery, connection: Connection) -> MetaSink:
        return self._sink(self.platform.received(delivery), connection)

    # -- the vendor check ----------------------------------------------------------------------
    async def verify(self, connection: Connection, webhook_url: str) -> str | None:
        platform = self.platform
        try:
            answer = await self.graph.call("GET", connection.secret(platform.id_field),
                                           connection.secret(platform.token_field),
                                           params={"fields": platform.account_fields()}, what="account")
        except ChannelRejected as exc:
            raise CredentialsRefused(f"credentials.{platform.token_field}: Meta refused the token or "
                                     f"{platform.id_field}: {exc.message}") from None
        except (ChannelUnavailable, ChannelRateLimited) as exc:  # a rate limit too: worth asking again later
            raise VendorUnreachable(exc.message) from exc
        return platform.account_name(answer)

    async def forget(self, connection: Connection) -> None:
        return None  # the webhook was set in Meta's app dashboard by the operator; nothing to undo

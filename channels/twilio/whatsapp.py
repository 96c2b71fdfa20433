"""WhatsApp through Twilio's Messaging API: a connection's sender (``whatsapp:+…``) and agent.

Twilio posts each WhatsApp message to ``/channels/whatsapp/{id}`` (``From``/``To`` are
``whatsapp:+<number>``), signed with the connection's auth token. Text goes through the inbox and a
turn; the reply is sent with the Messages API from the connection's sender, split at WhatsApp's
4,096 characters. A voice note, photo or document (issue 44) is handed to the gateway's media service,
which downloads it from Twilio's media URL with the account's credentials (sent only to the Twilio API's
own host) and makes it a turn, or answers politely; other media (a video, a contact card) is recorded
in the transcript with its media URL (no secret in it) and answered with a short text saying the bot
reads text. Outside WhatsApp's 24-hour
customer-service window Twilio refuses a free-form reply (error 63016): the refusal is the
reply's delivery error, in the turn trace and the console, and counted in the connection's status.
"""

from __future__ import annotations

import base64
import json
import logging
from urllib.parse import urlsplit

from fastapi import Request, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from channels.connection_capabilities import WHATSAPP
from channels.connections import note_delivery
from channels.delivery import deliver_parts
from channels.errors import ChannelRejected
from channels.masking import MaskedSink
from channels.media_answer import answer_media, media_turn_work, record_media
from channels.outbound_retry import RetryPolicy
from channels.render import render
from channels.reply_outcome import mark_reply, remember_sent
from channels.twilio.connection import TwilioAccountConnections
from channels.twilio.rest import TwilioRest, verified_form
from channels.twilio.sms import twiml
from gateway.channel import (
    Attachment,
    BadRequest,
    ChannelContext,
    ChannelDeliveryError,
    Connection,
    Delivery,
    DeliveryRejected,
    DeliveryReport,
    InboundMessage,
    MediaSource,
    SendWork,
    Turn,
    TurnWork,
    Work,
    delivery_id,
    order_key,
    scoped,
)

__all__ = ["OUTSIDE_WINDOW", "WhatsAppConnections", "WhatsAppWebhook", "build_connections"]

log = logging.getLogger(__name__)
CHANNEL = "whatsapp"
CAPABILITIES = WHATSAPP
OUTSIDE_WINDOW = "63016"  # Twilio: a free-form WhatsApp message outside the 24-hour window
FAILED = frozenset({"failed", "undelivered"})


class WhatsAppWebhook(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    message_sid: str = Field(alias="MessageSid")
    from_: str = Field(alias="From", pattern=r"^whatsapp:\+")
    to: str = Field(alias="To", pattern=r"^whatsapp:\+")
    body: str = Field(default="", alias="Body")
    num_media: int = Field(default=0, alias="NumMedia")
    profile_name: str | None = Field(default=None, alias="ProfileName")

    @classmethod
    def read(cls, form: dict[str, str]) -> tuple[WhatsAppWebhook, list[tuple[str, str]]]:
        """The message and its media as (content type, URL) pairs."""
        message = cls.model_validate(form)
        media = [(form.get(f"MediaContentType{i}", "application/octet-stream"), form[f"MediaUrl{i}"])
                 for i in range(message.num_media) if f"MediaUrl{i}" in form]
        return message, media


def _media_kind(content_type: str) -> str | None:
    """What the media service calls a Twilio media item, by its declared type; None: not one it reads."""
    if content_type.startswith("audio/"):
        return "audio"
    if content_type.startswith("image/"):
        return "photo"
    if content_type in DOCUMENT_TYPES:
        return "document"
    return None


DOCUMENT_TYPES = frozenset({"application/pdf", "text/plain", "text/csv",
                            "application/vnd.openxmlformats-officedocument.wordprocessingml.document"})


def _queued(delivery: Delivery) -> tuple[WhatsAppWebhook, list[tuple[str, str]]]:
    try:
        return WhatsAppWebhook.read(delivery.json())
    except (ValidationError, ValueError, KeyError) as exc:
        raise DeliveryRejected("not a Twilio WhatsApp webhook (MessageSid, From, To expected)") from exc


def _inbound(message: WhatsAppWebhook, text: str, media: list[tuple[str, str]]) -> InboundMessage:
    number = message.from_.removeprefix("whatsapp:")
    return InboundMessage(
        channel=CHANNEL, external_user_id=number, external_message_id=message.message_sid,
        identity=f"whatsapp:{number}", text=text, display_name=message.profile_name,
        attachments=tuple(Attachment(kind=kind.split("/", 1)[0], mime_type=kind) for kind, _ in media),
    )


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def _refused_outside_window() -> str:
    return (f"WhatsApp refused a free-form reply outside the 24-hour customer-service window "
            f"(Twilio {OUTSIDE_WINDOW}): waiting for a template message")


class WhatsAppSink:
    streaming = False
    channel = CHANNEL

    def __init__(self, rest: TwilioRest, to: str, sender: str, policy: RetryPolicy, context: ChannelContext,
                 connection: Connection, turn_id: str | None = None) -> None:
        self.rest, self.to, self.sender, self.policy = rest, to, sender, policy
        self.context, self.connection, self.connection_id = context, connection, connection.id
        self.turn_id = turn_id  # the turn whose reply this is: a later refusal (status callback) is written there
        self.status_url = connection.public(context.settings.public_url)["webhook_url"] + "/status"

    async def delta(self, text: str) -> None:  # pragma: no cover - not streaming
        raise NotImplementedError

    async def _send(self, part: str, idempotency_token: str | None = None) -> str:
        try:
            sid = await self.rest.send_sms(self.to, part, self.sender, idempotency_token, self.status_url)
        except ChannelRejected as exc:
            if OUTSIDE_WINDOW in exc.message:
                raise ChannelRejected(_refused_outside_window()) from exc
            raise
        # Twilio usually reports the refusal later, in the status callback
        await remember_sent(self.context, CHANNEL, self.connection_id, sid, turn_id=self.turn_id)
        return sid

    async def _noted(self, report: DeliveryReport) -> DeliveryReport:
        if not report.delivered and report.error and OUTSIDE_WINDOW in report.error and self.context.connections:
            await self.context.connections.count_refusal(self.connection_id)
            log.warning("whatsapp connection %s: reply refused outside the 24-hour window", self.connection_id)
        return await note_delivery(self.context, self.connection, report)

    async def deliver(self, text: str) -> DeliveryReport:
        return await self._noted(await deliver_parts(render(text, CAPABILITIES), self._send, self.policy,
                                                     what="twilio WhatsApp"))

    async def deliver_keyed(self, text: str, key: str) -> DeliveryReport:
        return await self._noted(await deliver_parts(render(text, CAPABILITIES), self._send, self.policy,
                                                     what="twilio WhatsApp", key=key))

    async def say(self, text: str) -> None:
        report = await self.deliver(text)
        if not report.delivered:
            raise ChannelDeliveryError(report.error or "whatsapp send failed")


class WhatsAppConnections(TwilioAccountConnections):
    capabilities = CAPABILITIES

    async def webhook(self, request: Request, connection: Connection) -> Response:
        form = await verified_form(request, self.context, CHANNEL, connection.secret("auth_token"))
        if request.url.path.endswith("/status"):
            await self._status(form, connection)
            return twiml()
        try:
            message, _ = WhatsAppWebhook.read(form)
        except ValidationError as exc:
            raise BadRequest("not a Twilio WhatsApp webhook (MessageSid, From and To as whatsapp:+…)") from exc
        await self.context.ack_delivery(CHANNEL, delivery_id(connection.id, message.message_sid),
                                        order_key(connection.id, message.from_), json.dumps(form))
        return twiml()

    async def accept(self, delivery: Delivery, connection: Connection) -> Work | None:
        message, media = _queued(delivery)
        sink = self.sink_for(delivery, connection)
        if message.body.strip():
            inbound = scoped(_inbound(message, message.body.strip(), media), connection)
            turn = await self.context.pipeline.accept(inbound, delivery_id=delivery.id)
            if turn is None:
                return None
            sink.turn_id = turn.trace.turn_id
            return TurnWork(turn, sink)
        if self.context.media is not None and any(_media_kind(kind) for kind, _ in media):
            return await self._media(message, media, delivery, connection, sink)
        if not await self.context.store.claim_once("msg", CHANNEL, delivery.dedup_id):
            return None
        described = "\n".join(f"[{kind}] {url}" for kind, url in media) or "[an empty message]"
        where = await record_media(self.context, scoped(_inbound(message, described, media), connection))
        masked = MaskedSink.of(sink, connection, self.context)  # its delivery error is stored below
        return SendWork(lambda: answer_media(self.context, masked, CHANNEL, *where),
                        what=f"whatsapp media answer ({connection.id})")

    async def _media(self, message: WhatsAppWebhook, media: list[tuple[str, str]], delivery: Delivery,
                     connection: Connection, sink: WhatsAppSink) -> Work | None:
        assert self.context.media is not None
        api_base = self.context.settings.twilio_api_base
        account = f"{connection.secret('account_sid')}:{connection.secret('auth_token')}"
        auth = {"Authorization": "Basic " + base64.b64encode(account.encode()).decode()}
        sources = [MediaSource(kind=kind, url=url, vendor_base=api_base,
                               headers=auth if _host(url) == _host(api_base) else {})  # credentials: Twilio's only
                   for content_type, url in media if (kind := _media_kind(content_type))]
        inbound = scoped(_inbound(message, message.body.strip(), media), connection)
        outcome = await self.context.media.accept(inbound, sources, delivery_id=delivery.id)
        if isinstance(outcome, Turn):
            sink.turn_id = outcome.trace.turn_id
        return await media_turn_work(self.context, outcome, MaskedSink.of(sink, connection, self.context), CHANNEL,
                                     ("msg", delivery.dedup_id), f"whatsapp media answer ({connection.id})")

    async def _status(self, form: dict[str, str], connection: Connection) -> None:
        """A reply Twilio or WhatsApp finally refused: its turn's trace and stored reply say why."""
        if form.get("MessageStatus") not in FAILED:
            return
        code = form.get("ErrorCode", "")
        error = (_refused_outside_window() if code == OUTSIDE_WINDOW
                 else f"WhatsApp did not deliver the reply (Twilio {code})")
        if self.context.connections is not None:
            await self.context.connections.note_error(connection, error)
            if code == OUTSIDE_WINDOW:
                await self.context.connections.count_refusal(connection.id)
        if not await mark_reply(self.context, CHANNEL, connection.id, form.get("MessageSid", ""), error=error):
            log.warning("whatsapp connection %s: a reply was refused (%s) but its turn is unknown", connection.id, code)

    def sink_for(self, delivery: Delivery, connection: Connection) -> WhatsAppSink:
        message, _ = _queued(delivery)
        sender = connection.secret("sender")
        return WhatsAppSink(self.clients.rest(connection, sender), message.from_, sender, self.policy,
                            self.context, connection)


def build_connections(context: ChannelContext) -> WhatsAppConnections:
    return WhatsAppConnections(context)

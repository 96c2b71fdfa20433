"""Twilio SMS: empty TwiML at once, the reply later through the REST API; STOP/START/HELP respected.

The webhook verifies the signature, answers the keywords itself and queues every other message
in the inbox (deduplicated on ``MessageSid``, ordered per number); a turn consumer persists and
answers it. A number that texted STOP gets nothing until it texts START (checked when the turn
is accepted and again just before each send, so a STOP that arrives mid-turn still wins). HELP
is answered in the webhook's own TwiML.
"""

from __future__ import annotations

import json
import logging

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError
from twilio.twiml.messaging_response import MessagingResponse

from channels import webhook_docs
from channels.connection_capabilities import TWILIO_SMS
from channels.delivery import deliver_parts, turn_runner
from channels.errors import ChannelRejected
from channels.outbound_retry import RetryPolicy
from channels.render import render
from channels.twilio.rest import SmsWebhook, TwilioRest, twilio_configured, verified_form
from gateway.channel import (
    Attachment,
    BadRequest,
    ChannelContext,
    Delivery,
    DeliveryRejected,
    DeliveryReport,
    InboundMessage,
    RedisStore,
    Settings,
    TurnWork,
)

__all__ = ["OptOuts", "SmsSink", "TwilioSmsAdapter", "build", "keyword"]

log = logging.getLogger(__name__)
CHANNEL = "twilio_sms"
SMS_PATH = "/channels/twilio/sms"
# what the OpenAPI document says this vendor sends here (the routes read raw bodies)
WEBHOOKS = {SMS_PATH: webhook_docs.TWILIO_SMS}
CAPABILITIES = TWILIO_SMS
# Twilio's default opt-out keywords (Advanced Opt-Out off or on, these are the standard sets)
STOP_WORDS = frozenset({"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "OPTOUT", "REVOKE"})
START_WORDS = frozenset({"START", "YES", "UNSTOP"})
HELP_WORDS = frozenset({"HELP", "INFO"})


def keyword(body: str) -> str | None:
    word = body.strip().strip(".!").upper()
    if word in STOP_WORDS:
        return "stop"
    if word in START_WORDS:
        return "start"
    if word in HELP_WORDS:
        return "help"
    return None


def twiml(text: str | None = None) -> Response:
    reply = MessagingResponse()
    if text:
        reply.message(text)
    return Response(str(reply), media_type="application/xml")


class OptOuts:
    def __init__(self, store: RedisStore, connection_id: str | None = None) -> None:
        """The numbers that texted STOP to the settings' number, or to one connection's."""
        self.store = store
        self.key = store.key("sms", "opted_out", *([connection_id] if connection_id else []))

    async def stop(self, number: str) -> None:
        await self.store.redis.sadd(self.key, number)

    async def start(self, number: str) -> None:
        await self.store.redis.srem(self.key, number)

    async def opted_out(self, number: str) -> bool:
        return bool(await self.store.redis.sismember(self.key, number))


def queued_sms(delivery: Delivery) -> SmsWebhook:
    try:
        return SmsWebhook.model_validate(delivery.json())
    except (ValidationError, ValueError) as exc:
        raise DeliveryRejected("not a Twilio SMS webhook (MessageSid, From, To expected)") from exc


def inbound_of(sms: SmsWebhook) -> InboundMessage:
    return InboundMessage(
        channel=CHANNEL,
        external_user_id=sms.from_,
        external_message_id=sms.message_sid,
        identity=f"phone:{sms.from_}",
        text=sms.body.strip(),
        attachments=tuple(Attachment(kind="media") for _ in range(sms.num_media)),
    )


async def answered_in_webhook(sms: SmsWebhook, opt_outs: OptOuts, settings: Settings) -> Response | None:
    """STOP, START, HELP and an empty message are answered in the webhook's TwiML; None for the rest."""
    match keyword(sms.body):
        case "stop":
            await opt_outs.stop(sms.from_)
            return twiml()  # Twilio confirms the opt-out itself
        case "start":
            await opt_outs.start(sms.from_)
            return twiml(settings.sms_resubscribed_message)
        case "help":
            return twiml(settings.sms_help_message)
    if not sms.body.strip():
        return twiml(settings.channel_unsupported_message)
    return None


class SmsSink:
    streaming = False
    channel = CHANNEL

    def __init__(self, rest: TwilioRest, opt_outs: OptOuts, to: str, from_: str, policy: RetryPolicy) -> None:
        self.rest = rest
        self.opt_outs = opt_outs
        self.to = to
        self.from_ = from_
        self.policy = policy

    async def delta(self, text: str) -> None:  # pragma: no cover - not streaming
        raise NotImplementedError

    async def _send(self, part: str, idempotency_token: str | None = None) -> str:
        if await self.opt_outs.opted_out(self.to):
            raise ChannelRejected("recipient opted out (STOP)")
        return await self.rest.send_sms(self.to, part, self.from_, idempotency_token)

    async def deliver(self, text: str) -> DeliveryReport:
        return await deliver_parts(render(text, CAPABILITIES), self._send, self.policy, what="twilio SMS")

    async def deliver_keyed(self, text: str, key: str) -> DeliveryReport:
        """Each part under Twilio's idempotency token ``<key>:<part>``: a resumed turn resends safely."""
        return await deliver_parts(render(text, CAPABILITIES), self._send, self.policy, what="twilio SMS", key=key)


class TwilioSmsAdapter:
    name = CHANNEL
    capabilities = CAPABILITIES

    def __init__(self, context: ChannelContext) -> None:
        self.context = context
        self.rest = TwilioRest(context)
        self.opt_outs = OptOuts(context.store)
        self.policy = RetryPolicy.from_settings(context.settings)
        self.runner = turn_runner(context)

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        await self.runner.drain()
        await self.rest.close()

    async def sms(self, request: Request) -> Response:
        form = await verified_form(request, self.context, CHANNEL)
        try:
            sms = SmsWebhook.model_validate(form)
        except ValidationError as exc:
            raise BadRequest("not a Twilio SMS webhook (MessageSid, From, To expected)") from exc
        answer = await answered_in_webhook(sms, self.opt_outs, self.context.settings)
        if answer is not None:
            return answer
        await self.context.ack_delivery(CHANNEL, sms.message_sid, sms.from_, json.dumps(form))
        return twiml()

    # -- a turn consumer hands queued messages back here ---------------------------------------
    @staticmethod
    def _sms(delivery: Delivery) -> SmsWebhook:
        return queued_sms(delivery)

    async def accept(self, delivery: Delivery) -> TurnWork | None:
        sms = self._sms(delivery)
        if await self.opt_outs.opted_out(sms.from_):
            log.info("SMS %s from an opted-out number; not answered", sms.message_sid)
            return None
        turn = await self.context.pipeline.accept(inbound_of(sms), delivery_id=delivery.id)
        return None if turn is None else TurnWork(turn, self.sink_for(delivery))

    def sink_for(self, delivery: Delivery) -> SmsSink:
        sms = self._sms(delivery)
        return SmsSink(self.rest, self.opt_outs, sms.from_, sms.to, self.policy)

    def router(self) -> APIRouter:
        router = APIRouter()
        router.add_route(SMS_PATH, self.sms, methods=["POST"], include_in_schema=False)  # a plain webhook route
        return router


def build(context: ChannelContext) -> TwilioSmsAdapter | None:
    return TwilioSmsAdapter(context) if twilio_configured(context) else None

"""Twilio voice: speech turns over TwiML, never keeping Twilio waiting past its 15 seconds.

``/voice`` greets inside ``<Gather input="speech" bargeIn>``; its ``action`` is ``/voice/turn?n=1``.
A speech result is accepted as turn ``CallSid:n`` (so Twilio's retries are one turn), the turn
runs in the background (RAG as a queued job: the ``rag_mode`` capability), and the webhook
waits up to ``voice_reply_deadline_s`` for the reply: ready → ``<Say>`` inside the next
``<Gather>``; not ready → a short filler and a ``<Redirect>`` that waits again (bounded). Silence
re-prompts once, then ends the call politely. ``/voice/status`` ends the conversation.
Replies live in Redis, so whichever replica Twilio reaches next can pick them up.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlencode

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError
from twilio.twiml.voice_response import Connect, ConversationRelay, Gather, VoiceResponse

from channels import webhook_docs
from channels.delivery import turn_runner
from channels.render import render
from channels.twilio.relay_tickets import issue_relay_url
from channels.twilio.rest import CallWebhook, twilio_configured, verified_form
from gateway.channel import (
    BadRequest,
    Capabilities,
    ChannelContext,
    DeliveryReport,
    EndReason,
    InboundMessage,
    RedisStore,
)

__all__ = ["TwilioVoiceAdapter", "VoiceSink", "build"]

log = logging.getLogger(__name__)
CHANNEL = "twilio_voice"
VOICE_PATH = "/channels/twilio/voice"
TURN_PATH = VOICE_PATH + "/turn"
STATUS_PATH = VOICE_PATH + "/status"
RELAY_ENDED_PATH = VOICE_PATH + "/relay-ended"
# what the OpenAPI document says this vendor sends here (the routes read raw bodies)
WEBHOOKS = {VOICE_PATH: webhook_docs.TWILIO_CALL, TURN_PATH: webhook_docs.TWILIO_SPEECH,
            STATUS_PATH: webhook_docs.TWILIO_STATUS}
CAPABILITIES = Capabilities(max_length=4000, markup="plain", voice=True, rag_mode="queued", handoff=False,
                            citations="drop")
ENDED_STATUSES = frozenset({"completed", "busy", "failed", "no-answer", "canceled"})
_KEY_TTL_S = 3600
_POLL_S = 0.05


class VoiceSink:
    """Delivery is leaving the spoken reply where the call's next webhook will find it."""

    streaming = False
    channel = CHANNEL

    def __init__(self, store: RedisStore, key: str) -> None:
        self.store = store
        self.key = key

    async def delta(self, text: str) -> None:  # pragma: no cover - not streaming
        raise NotImplementedError

    async def deliver(self, text: str) -> DeliveryReport:
        spoken = " ".join(render(text, CAPABILITIES))
        await self.store.redis.set(self.key, spoken, ex=_KEY_TTL_S)
        return DeliveryReport(delivered=True)


class TwilioVoiceAdapter:
    name = CHANNEL
    capabilities = CAPABILITIES

    def __init__(self, context: ChannelContext) -> None:
        self.context = context
        self.settings = context.settings
        self.store = context.store
        self.runner = turn_runner(context)

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        await self.runner.drain()

    # -- TwiML ---------------------------------------------------------------------------------
    def _url(self, path: str, **query: int) -> str:
        base = self.settings.public_url.rstrip("/") + path
        return f"{base}?{urlencode(query)}" if query else base

    def _listen(self, response: VoiceResponse, say: str, n: int, silences: int = 1) -> Response:
        """Say ``say`` inside a barge-in speech Gather for turn ``n``; silence falls through to the Redirect."""
        gather = Gather(input="speech", action=self._url(TURN_PATH, n=n), method="POST",
                        speech_timeout="auto", barge_in=True, language=self.settings.voice_language)
        gather.say(say, language=self.settings.voice_language)
        response.append(gather)
        response.redirect(self._url(TURN_PATH, n=n, quiet=silences), method="POST")
        return self._twiml(response)

    def _twiml(self, response: VoiceResponse) -> Response:
        return Response(str(response), media_type="application/xml")

    # -- webhooks ------------------------------------------------------------------------------
    async def _call(self, request: Request) -> CallWebhook:
        form = await verified_form(request, self.context, CHANNEL)
        try:
            return CallWebhook.model_validate(form)
        except ValidationError as exc:
            raise BadRequest("not a Twilio voice webhook (CallSid, From, To expected)") from exc

    async def incoming(self, request: Request) -> Response:
        call = await self._call(request)
        log.info("incoming call %s", call.call_sid)
        if self.settings.twilio_voice_mode == "relay":
            return await self._relay(VoiceResponse(), call, self.settings.voice_greeting)
        return self._listen(VoiceResponse(), self.settings.voice_greeting, 1)

    async def _relay(self, response: VoiceResponse, call: CallWebhook, greeting: str) -> Response:
        """Hand the call to ConversationRelay: Twilio does speech both ways, our socket writes the replies.
        The socket's URL carries a single-use ticket for this call and caller (``twilio_relay_tickets``)."""
        connect = Connect(action=self._url(RELAY_ENDED_PATH), method="POST")
        options = {"voice": self.settings.twilio_relay_voice} if self.settings.twilio_relay_voice else {}
        url = await issue_relay_url(self.context, call.call_sid, call.from_)
        relay = ConversationRelay(url=url, welcome_greeting=greeting,
                                  language=self.settings.voice_language, interruptible="any", **options)
        relay.parameter(name="caller", value=call.from_)
        connect.append(relay)
        response.append(connect)
        return self._twiml(response)

    async def relay_ended(self, request: Request) -> Response:
        """The relay session ended: with handoff data, to a person (or, with no number, back to the agent)."""
        form = await verified_form(request, self.context, CHANNEL)
        try:
            call = CallWebhook.model_validate(form)
        except ValidationError as exc:
            raise BadRequest("not a Twilio voice webhook (CallSid, From, To expected)") from exc
        response = VoiceResponse()
        if not form.get("HandoffData"):
            response.hangup()
            return self._twiml(response)
        number = self.settings.twilio_handoff_number
        if number:
            log.info("call %s: handed off to %s", call.call_sid, number)
            response.dial(number)
            return self._twiml(response)
        return await self._relay(response, call, self.settings.twilio_handoff_unavailable)

    async def turn(self, request: Request, n: int = 1, quiet: int = 0, wait: int = 0) -> Response:
        call = await self._call(request)
        speech = (call.speech_result or "").strip()
        if wait:
            return await self._answer(call, n, wait)
        if speech:
            await self._accept(call, n, speech)
            return await self._answer(call, n, 0)
        if quiet <= 1:  # the first silence gets one re-prompt
            return self._listen(VoiceResponse(), self.settings.voice_reprompt, n, silences=quiet + 1)
        response = VoiceResponse()
        response.say(self.settings.voice_goodbye, language=self.settings.voice_language)
        response.hangup()
        return self._twiml(response)

    async def status(self, request: Request) -> Response:
        call = await self._call(request)
        if call.call_status in ENDED_STATUSES:
            conv_id = await self.store.redis.get(self.store.key("voice", "call", call.call_sid))
            conversation = await self.store.get_conversation(conv_id.decode()) if conv_id else None
            if conversation is not None and await self.context.sessions.end(conversation, EndReason.CALL_ENDED):
                log.info("call %s %s: conversation %s ended", call.call_sid, call.call_status, conversation.id)
        return Response(status_code=204)

    # -- turns ---------------------------------------------------------------------------------
    def _reply_key(self, call_sid: str, n: int) -> str:
        return self.store.key("voice", "reply", call_sid, str(n))

    async def _accept(self, call: CallWebhook, n: int, speech: str) -> None:
        inbound = InboundMessage(
            channel=CHANNEL,
            external_user_id=call.from_,
            external_message_id=f"{call.call_sid}:{n}",
            identity=f"phone:{call.from_}",
            text=speech,
            thread=call.call_sid,
        )
        turn = await self.context.pipeline.accept(inbound, rag_mode=CAPABILITIES.rag_mode)
        if turn is None:
            return  # Twilio retried this webhook: the turn is already running; wait for its reply
        await self.store.redis.set(self.store.key("voice", "call", call.call_sid), turn.conversation.id,
                                   ex=_KEY_TTL_S * 4)
        self.runner.schedule(turn, VoiceSink(self.store, self._reply_key(call.call_sid, n)))

    async def _answer(self, call: CallWebhook, n: int, waited: int) -> Response:
        reply = await self._wait_for_reply(call.call_sid, n)
        if reply is not None:
            return self._listen(VoiceResponse(), reply, n + 1)
        if waited < self.settings.voice_max_waits:
            response = VoiceResponse()
            response.say(self.settings.voice_filler, language=self.settings.voice_language)
            response.redirect(self._url(TURN_PATH, n=n, wait=waited + 1), method="POST")
            return self._twiml(response)
        log.warning("call %s turn %d: no reply after %d waits", call.call_sid, n, waited)
        return self._listen(VoiceResponse(), self.settings.voice_unavailable, n + 1)

    async def _wait_for_reply(self, call_sid: str, n: int) -> str | None:
        key = self._reply_key(call_sid, n)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.voice_reply_deadline_s
        while True:
            raw = await self.store.redis.get(key)
            if raw is not None:
                return raw.decode()
            if loop.time() >= deadline:
                return None
            await asyncio.sleep(_POLL_S)

    def router(self) -> APIRouter:
        router = APIRouter()
        router.add_api_route(VOICE_PATH, self.incoming, methods=["POST"], include_in_schema=False)
        router.add_api_route(TURN_PATH, self.turn, methods=["POST"], include_in_schema=False)
        router.add_api_route(STATUS_PATH, self.status, methods=["POST"], include_in_schema=False)
        router.add_api_route(RELAY_ENDED_PATH, self.relay_ended, methods=["POST"], include_in_schema=False)
        return router


def build(context: ChannelContext) -> TwilioVoiceAdapter | None:
    return TwilioVoiceAdapter(context) if twilio_configured(context) else None

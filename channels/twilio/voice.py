"""Twilio voice: speech turns over TwiML, never keeping Twilio waiting past its 15 seconds.

``/voice`` greets inside ``<Gather input="speech" bargeIn>``; its ``action`` is ``/voice/turn?n=1``.
A speech result is accepted as turn ``CallSid:n`` (so Twilio's retries are one turn), the turn
runs in the background (RAG as a queued job: the ``rag_mode`` capability), and the webhook
waits up to ``voice_reply_deadline_s`` for the reply: ready → ``<Say>`` inside the next
``<Gather>``; not ready → a short filler and a ``<Redirect>`` that waits again (bounded). Silence
re-prompts once, then ends the call politely; keys pressed instead of speaking are the turn's text
(``[pressed 1]``). ``/voice/status`` ends the conversation. ``SWITCHBOARD_TWILIO_GREETING_DISCLOSURE`` is
said before the greeting of every call, either way. A relay call handed to a person is dialled with a
``<Number url>`` to ``/voice/whisper``, which says the call's summary to the person before the caller joins.
Replies live in Redis, so whichever replica Twilio reaches next can pick them up. Every webhook serves a
``Line``: the environment's number on ``/channels/twilio/voice…``, or a connection's on
``/channels/twilio/<id>/voice…`` (``channels.twilio.voice_connection``), each with its own URLs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from urllib.parse import urlencode

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError
from twilio.twiml.voice_response import Connect, ConversationRelay, Dial, Gather, VoiceResponse

from channels import webhook_docs
from channels.connection_capabilities import TWILIO_VOICE
from channels.delivery import turn_runner
from channels.render import render
from channels.twilio.caller_language import parse_languages
from channels.twilio.handoff_phrasebook import handoff_unavailable
from channels.twilio.keypad import KEYS, pressed
from channels.twilio.line import ENVIRONMENT_VOICE_PATH, Line
from channels.twilio.relay_tickets import issue_relay_url, remembered_language
from channels.twilio.rest import CallWebhook, twilio_configured, verified_form
from gateway.channel import BadRequest, ChannelContext, DeliveryReport, EndReason, NotFound, RedisStore

__all__ = ["TwilioVoiceAdapter", "VoiceSink", "build"]

log = logging.getLogger(__name__)
CHANNEL = "twilio_voice"
VOICE_PATH = ENVIRONMENT_VOICE_PATH
TURN, STATUS, RELAY_ENDED, WHISPER = "/turn", "/status", "/relay-ended", "/whisper"  # under a line's voice path
# what the OpenAPI document says this vendor sends here (the routes read raw bodies)
WEBHOOKS = {VOICE_PATH: webhook_docs.TWILIO_CALL, VOICE_PATH + TURN: webhook_docs.TWILIO_SPEECH,
            VOICE_PATH + STATUS: webhook_docs.TWILIO_STATUS, VOICE_PATH + WHISPER: webhook_docs.TWILIO_CALL}
CAPABILITIES = TWILIO_VOICE
ENDED_STATUSES = frozenset({"completed", "busy", "failed", "no-answer", "canceled"})
_KEY_TTL_S = 3600
_POLL_S = 0.05
_MAX_WHISPER_CHARS = 600  # what the operator hears before the caller: the relay's two lines, bounded


class VoiceSink:
    """Delivery is leaving the spoken reply where the call's next webhook will find it. A call whose status
    callback said it ended before then was left mid-answer (``ended_key``: set by ``/voice/status``)."""

    streaming = False
    channel = CHANNEL

    def __init__(self, store: RedisStore, key: str, ended_key: str | None = None) -> None:
        self.store = store
        self.key = key
        self.ended_key = ended_key

    async def delta(self, text: str) -> None:  # pragma: no cover - not streaming
        raise NotImplementedError

    async def deliver(self, text: str) -> DeliveryReport:
        spoken = " ".join(render(text, CAPABILITIES))
        await self.store.redis.set(self.key, spoken, ex=_KEY_TTL_S)
        # written first, then the call's end read (``status`` does the opposite): one of the two sees the other
        left = bool(self.ended_key and await self.store.redis.exists(self.ended_key))
        return DeliveryReport(delivered=True, left=left)


class TwilioVoiceAdapter:
    name = CHANNEL
    capabilities = CAPABILITIES

    def __init__(self, context: ChannelContext) -> None:
        self.context = context
        self.settings = context.settings
        self.store = context.store
        self.runner = turn_runner(context)
        self.line = Line.environment(self.settings)

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        await self.runner.drain()

    # -- TwiML ---------------------------------------------------------------------------------
    def _url(self, line: Line, under: str, **query: int | str) -> str:
        base = self.settings.public_url.rstrip("/") + line.voice_path + under
        return f"{base}?{urlencode(query)}" if query else base

    def _listen(self, line: Line, response: VoiceResponse, say: str, n: int, silences: int = 1) -> Response:
        """Say ``say`` inside a barge-in speech Gather for turn ``n``; silence falls through to the Redirect."""
        gather = Gather(input="speech dtmf", action=self._url(line, TURN, n=n), method="POST",
                        speech_timeout="auto", barge_in=True, language=self.settings.voice_language)
        gather.say(say, language=self.settings.voice_language)
        response.append(gather)
        response.redirect(self._url(line, TURN, n=n, quiet=silences), method="POST")
        return self._twiml(response)

    def _twiml(self, response: VoiceResponse) -> Response:
        return Response(str(response), media_type="application/xml")

    # -- webhooks ------------------------------------------------------------------------------
    async def _form(self, request: Request, line: Line) -> tuple[CallWebhook, dict[str, str]]:
        form = await verified_form(request, self.context, CHANNEL, line.auth_token)
        try:
            return CallWebhook.model_validate(form), form
        except ValidationError as exc:
            raise BadRequest("not a Twilio voice webhook (CallSid, From, To expected)") from exc

    async def _call(self, request: Request, line: Line) -> CallWebhook:
        return (await self._form(request, line))[0]

    async def answer(self, request: Request, line: Line) -> Response:
        """Any of ``line``'s webhooks, told apart by the path under its voice path."""
        under = request.url.path.removeprefix(line.voice_path)
        handlers = {"": self.incoming, TURN: self.turn, STATUS: self.status, RELAY_ENDED: self.relay_ended,
                    WHISPER: self.whisper}
        if under not in handlers:
            raise NotFound(f"no voice webhook at {request.url.path}")
        return await handlers[under](request, line)

    async def incoming(self, request: Request, line: Line) -> Response:
        call = await self._call(request, line)
        log.info("incoming call %s", call.call_sid)
        await line.note_call(self.context)
        disclosure = (self.settings.twilio_greeting_disclosure or "").strip()
        greeting = f"{disclosure} {self.settings.voice_greeting}" if disclosure else self.settings.voice_greeting
        if self.settings.twilio_voice_mode == "relay":
            return await self._relay(line, VoiceResponse(), call, greeting)
        return self._listen(line, VoiceResponse(), greeting, 1)

    async def _relay(self, line: Line, response: VoiceResponse, call: CallWebhook, greeting: str,
                     language: str | None = None) -> Response:
        """Hand the call to ConversationRelay: Twilio does speech both ways, our socket writes the replies.
        The socket's URL carries a single-use ticket for this call, caller and line (``relay_tickets``), and
        ``language``, the caller's when an earlier session of the call detected it."""
        connect = Connect(action=self._url(line, RELAY_ENDED), method="POST")
        options = {"voice": self.settings.twilio_relay_voice} if self.settings.twilio_relay_voice else {}
        url = await issue_relay_url(self.context, call.call_sid, call.from_, connection_id=line.connection_id,
                                    path=line.relay_path, language=language)
        relay = ConversationRelay(url=url, welcome_greeting=greeting, language=language or self.settings.voice_language,
                                  interruptible="any", dtmf_detection=True, **options)
        for code in parse_languages(self.settings.twilio_relay_languages):  # what the call may switch to
            relay.language(code=code)
        relay.parameter(name="caller", value=call.from_)
        connect.append(relay)
        response.append(connect)
        return self._twiml(response)

    async def relay_ended(self, request: Request, line: Line) -> Response:
        """The relay session ended: with handoff data, to a person (or, with no number, back to the agent).
        The handoff data's summary is whispered to the person before the caller is connected (``whisper``)."""
        call, form = await self._form(request, line)
        response = VoiceResponse()
        if not form.get("HandoffData"):
            response.hangup()
            return self._twiml(response)
        number = self.settings.twilio_handoff_number
        if not number:  # back to the agent, in the language the caller was heard speaking
            language = await remembered_language(self.context, call.call_sid, line.connection_id)
            if language not in parse_languages(self.settings.twilio_relay_languages):
                language = None
            greeting = handoff_unavailable(self.settings, language)
            return await self._relay(line, response, call, greeting, language)
        log.info("call %s: handed off to %s", call.call_sid, number)
        whisper = _whisper_of(form["HandoffData"])
        if not whisper:
            response.dial(number)
            return self._twiml(response)
        await self.store.redis.set(self._whisper_key(line, call.call_sid), whisper, ex=_KEY_TTL_S)
        dial = Dial()
        dial.number(number, url=self._url(line, WHISPER, call=call.call_sid), method="POST")
        response.append(dial)
        return self._twiml(response)

    async def whisper(self, request: Request, line: Line) -> Response:
        """The operator's leg answered (the ``<Number url>``): it hears the call's summary, then the caller
        is connected. ``call`` is the caller's call (its summary was kept by ``relay_ended``)."""
        await self._call(request, line)
        parent = request.query_params.get("call", "")
        if not parent or len(parent) > 64:
            raise BadRequest("query parameter call: the caller's CallSid expected")
        response = VoiceResponse()
        summary = await self.store.redis.get(self._whisper_key(line, parent))
        if summary is not None:
            response.say(summary.decode(), language=self.settings.voice_language)
        return self._twiml(response)

    async def turn(self, request: Request, line: Line) -> Response:
        n, quiet, wait = (_query_int(request, name, default) for name, default in (("n", 1), ("quiet", 0), ("wait", 0)))
        call = await self._call(request, line)
        speech = (call.speech_result or "").strip()
        keys = "".join(key for key in call.digits or "" if key in KEYS)[:32]
        if not speech and keys:  # the caller pressed keys instead of speaking
            speech = pressed(keys)
        if wait:
            return await self._answer(line, call, n, wait)
        if speech:
            await self._accept(line, call, n, speech)
            return await self._answer(line, call, n, 0)
        if quiet <= 1:  # the first silence gets one re-prompt
            return self._listen(line, VoiceResponse(), self.settings.voice_reprompt, n, silences=quiet + 1)
        response = VoiceResponse()
        response.say(self.settings.voice_goodbye, language=self.settings.voice_language)
        response.hangup()
        return self._twiml(response)

    async def status(self, request: Request, line: Line) -> Response:
        call = await self._call(request, line)
        if call.call_status in ENDED_STATUSES:
            conv_id = await self.store.redis.get(self._call_key(line, call.call_sid))
            if conv_id is not None:
                await self._left_unheard(line, call.call_sid, conv_id.decode())
            conversation = await self.store.get_conversation(conv_id.decode()) if conv_id else None
            if conversation is not None and await self.context.sessions.end(conversation, EndReason.CALL_ENDED):
                log.info("call %s %s: conversation %s ended", call.call_sid, call.call_status, conversation.id)
        return Response(status_code=204)

    async def _left_unheard(self, line: Line, call_sid: str, conversation_id: str) -> None:
        """The call ended while a turn's answer was pending (not yet spoken): abandoned. A turn still running
        sees the call's end as it delivers (``VoiceSink``); a reply already written but never spoken is
        counted here."""
        pipe = self.store.redis.pipeline(transaction=False)
        pipe.set(self._ended_key(line, call_sid), 1, ex=_KEY_TTL_S)
        pipe.get(self._pending_key(line, call_sid))
        _, pending = await pipe.execute()
        if pending is None:
            return
        written = await self.store.redis.exists(self._reply_key(line, call_sid, int(pending)))
        if written and self.context.left_after_turn is not None:
            log.info("call %s ended before turn %s's reply was spoken: abandoned", call_sid, pending.decode())
            await self.context.left_after_turn(conversation_id)

    # -- turns ---------------------------------------------------------------------------------
    def _reply_key(self, line: Line, call_sid: str, n: int) -> str:
        return self.store.key("voice", *line.key_parts("reply", call_sid, str(n)))

    def _pending_key(self, line: Line, call_sid: str) -> str:
        """The call's turn whose reply is not spoken yet (its number), while there is one."""
        return self.store.key("voice", *line.key_parts("pending", call_sid))

    def _ended_key(self, line: Line, call_sid: str) -> str:
        return self.store.key("voice", *line.key_parts("ended", call_sid))

    def _call_key(self, line: Line, call_sid: str) -> str:
        return self.store.key("voice", *line.key_parts("call", call_sid))

    def _whisper_key(self, line: Line, call_sid: str) -> str:
        return self.store.key("voice", *line.key_parts("whisper", call_sid))

    async def _accept(self, line: Line, call: CallWebhook, n: int, speech: str) -> None:
        inbound = line.inbound(CHANNEL, call.from_, f"{call.call_sid}:{n}", speech, call.call_sid)
        turn = await self.context.pipeline.accept(inbound, rag_mode=CAPABILITIES.rag_mode)
        if turn is None:
            return  # Twilio retried this webhook: the turn is already running; wait for its reply
        pipe = self.store.redis.pipeline(transaction=False)
        pipe.set(self._call_key(line, call.call_sid), turn.conversation.id, ex=_KEY_TTL_S * 4)
        pipe.set(self._pending_key(line, call.call_sid), n, ex=_KEY_TTL_S)
        await pipe.execute()
        sink = VoiceSink(self.store, self._reply_key(line, call.call_sid, n), self._ended_key(line, call.call_sid))
        self.runner.schedule(turn, line.sink(sink, self.context))

    async def _answer(self, line: Line, call: CallWebhook, n: int, waited: int) -> Response:
        reply = await self._wait_for_reply(self._reply_key(line, call.call_sid, n))
        if reply is not None:
            await self.store.redis.delete(self._pending_key(line, call.call_sid))  # it is spoken now
            return self._listen(line, VoiceResponse(), reply, n + 1)
        if waited < self.settings.voice_max_waits:
            response = VoiceResponse()
            response.say(self.settings.voice_filler, language=self.settings.voice_language)
            response.redirect(self._url(line, TURN, n=n, wait=waited + 1), method="POST")
            return self._twiml(response)
        log.warning("call %s turn %d: no reply after %d waits", call.call_sid, n, waited)
        return self._listen(line, VoiceResponse(), self.settings.voice_unavailable, n + 1)

    async def _wait_for_reply(self, key: str) -> str | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.voice_reply_deadline_s
        while True:
            raw = await self.store.redis.get(key)
            if raw is not None:
                return raw.decode()
            if loop.time() >= deadline:
                return None
            await asyncio.sleep(_POLL_S)

    async def environment(self, request: Request) -> Response:
        return await self.answer(request, self.line)

    def router(self) -> APIRouter:
        router = APIRouter()
        for under in ("", TURN, STATUS, RELAY_ENDED, WHISPER):  # plain webhook routes
            router.add_route(VOICE_PATH + under, self.environment, methods=["POST"], include_in_schema=False)
        return router


def _whisper_of(handoff_data: str) -> str:
    """What the operator hears from the relay's ``handoffData``: its summary and question; "" without them."""
    try:
        data = json.loads(handoff_data)
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    lines = [str(data[name]).strip() for name in ("summary", "question") if isinstance(data.get(name), str)]
    return " ".join(line for line in lines if line)[:_MAX_WHISPER_CHARS]


def _query_int(request: Request, name: str, default: int) -> int:
    """A small counter from the query string Twilio was given (``?n=2&wait=1``)."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or len(raw) > 4:
        raise BadRequest(f"query parameter {name}: a small non-negative integer expected")
    return int(raw)


def build(context: ChannelContext) -> TwilioVoiceAdapter | None:
    return TwilioVoiceAdapter(context) if twilio_configured(context) else None

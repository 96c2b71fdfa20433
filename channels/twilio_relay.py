"""Phone calls over Twilio ConversationRelay: Twilio turns speech into text and text into speech on its
side and talks to us over one WebSocket per call (``/channels/twilio/relay``).

Each final ``prompt`` runs one turn of the shared pipeline (knowledge context inline by default, the handoff gate,
traces, memory). The model's deltas go back as ``text`` tokens in whole words, markdown and citation
markers stripped, so the caller hears the first words while the model still writes. An ``interrupt``
(the caller barged in) cancels the model's stream at once and stores only what the caller heard. A
request for a person ends the session with ``handoffData``; the ``<Connect action>`` webhook then dials
``SWITCHBOARD_TWILIO_HANDOFF_NUMBER`` (``channels.twilio_voice``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from dataclasses import dataclass, field

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from twilio.request_validator import RequestValidator

from gateway.channel import Capabilities, ChannelContext, DeliveryReport, InboundMessage

log = logging.getLogger(__name__)

CHANNEL = "twilio_relay"
RELAY_PATH = "/channels/twilio/relay"
SIGNATURE_HEADER = "x-twilio-signature"
_MARKUP = re.compile(r"\[\d+\]|[*_`#>]+|\[([^\]]*)\]\([^)]*\)")
_HANDOFF_DATA = json.dumps({"reason": "the caller asked for a person", "reasonCode": "live-agent-handoff"})
MAX_WORD_CHARS = 64  # a "word" longer than this (no space in sight) is spoken as it stands
MAX_TURNS_IN_FLIGHT = 3  # a call's replies still running (cut or not); a prompt past them is refused


def relay_url(public_url: str) -> str:
    """The socket's address as Twilio is told it (and signs it): wss:// for https, ws:// for http."""
    base = public_url.rstrip("/")
    scheme, _, rest = base.partition("://")
    return f"{'wss' if scheme == 'https' else 'ws'}://{rest}{RELAY_PATH}"


def speakable(text: str) -> str:
    """Text as it should be spoken: no markdown emphasis, headings or citation markers; links read as
    their words."""
    return _MARKUP.sub(lambda match: match.group(1) or "", text)


class _Words:
    """Deltas in, whole words out: a token ends at whitespace, so speech never breaks inside a word. What
    waits for its word's end is bounded: past ``MAX_WORD_CHARS`` without a space it goes out as it is."""

    def __init__(self) -> None:
        self.pending = ""

    def feed(self, delta: str) -> str:
        self.pending += delta
        cut = max(self.pending.rfind(" "), self.pending.rfind("\n"))
        if cut < 0:
            if len(self.pending) <= MAX_WORD_CHARS:
                return ""
            cut = len(self.pending) - 1
        ready, self.pending = self.pending[: cut + 1], self.pending[cut + 1:]
        return speakable(ready)

    def rest(self) -> str:
        ready, self.pending = self.pending, ""
        return speakable(ready)


class RelaySink:
    """Speaks a turn's reply on the call's socket; stops at once when the caller interrupts."""

    streaming = True
    channel = CHANNEL

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.words = _Words()
        self.spoken = ""  # every token sent, for a socket that drops mid-reply
        self.heard = ""  # what the caller heard before cutting in (Twilio's utteranceUntilInterrupt)
        self.interrupted = asyncio.Event()
        self.streamed = False

    async def _send(self, token: str, last: bool) -> None:
        if self.interrupted.is_set():
            return
        self.spoken += token
        await self.ws.send_json({"type": "text", "token": token, "last": last})

    async def delta(self, text: str) -> None:
        self.streamed = True
        token = self.words.feed(text)
        if token.strip():
            await self._send(token, last=False)

    async def deliver(self, text: str) -> DeliveryReport:
        if self.interrupted.is_set():
            return DeliveryReport(delivered=True)  # what was heard is stored; nothing more is said
        tail = self.words.rest() if self.streamed else speakable(text)
        try:
            await self._send(tail, last=True)
        except (WebSocketDisconnect, RuntimeError) as exc:  # the call's socket went away
            return DeliveryReport(delivered=False, error=f"relay socket closed: {exc}", retryable=False)
        return DeliveryReport(delivered=True)

    def cut(self, heard: str | None) -> None:
        self.heard = heard if heard is not None else self.spoken
        self.interrupted.set()


@dataclass
class _Call:
    sid: str | None = None
    caller: str = ""
    sink: RelaySink | None = None
    task: asyncio.Task | None = None
    tasks: set[asyncio.Task] = field(default_factory=set)
    expected: asyncio.Task | None = None  # the caller's persona, resolved while the welcome greeting plays


class TwilioRelayAdapter:
    name = CHANNEL

    def __init__(self, context: ChannelContext) -> None:
        self.context = context
        self.settings = context.settings
        handoff = bool(self.settings.twilio_handoff_number)
        self.capabilities = Capabilities(max_length=4000, markup="plain", voice=True, streaming=True,
                                         rag_mode=self.settings.twilio_relay_rag_mode, handoff=handoff,
                                         citations="drop")
        self._phrases = [p.strip().lower() for p in self.settings.handoff_phrases.split("|") if p.strip()]

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def _signed(self, ws: WebSocket) -> bool:
        token = self.settings.twilio_auth_token
        signature = ws.headers.get(SIGNATURE_HEADER, "")
        url = relay_url(self.settings.public_url)
        return bool(token and signature and RequestValidator(token.get_secret_value()).validate(url, {}, signature))

    async def socket(self, ws: WebSocket) -> None:
        if not self._signed(ws):
            self.context.metrics.rejected.labels(CHANNEL, "signature").inc()
            log.warning("relay socket refused: missing or wrong %s", SIGNATURE_HEADER)
            await ws.close(code=1008)
            return
        await ws.accept()
        call = _Call()
        try:
            while True:
                await self._message(ws, call, await ws.receive_text())
        except WebSocketDisconnect:
            if call.sink is not None and call.task is not None and not call.task.done():
                call.sink.cut(None)  # the transcript keeps what was said; nothing is said again
        finally:
            running = [*call.tasks, *([call.expected] if call.expected is not None else [])]
            if running:
                await asyncio.gather(*running, return_exceptions=True)

    async def _message(self, ws: WebSocket, call: _Call, raw: str) -> None:
        try:
            message = json.loads(raw)
            kind = message.get("type") if isinstance(message, dict) else None
        except ValueError:
            kind = None
        if kind == "setup":
            call.sid = str(message.get("callSid") or "") or None
            call.caller = str(message.get("from") or "")
            log.info("relay session for call %s", call.sid)
            if call.caller and call.expected is None:
                call.expected = asyncio.ensure_future(self._expect(call))  # not a reply: not in ``tasks``' bound
        elif kind == "prompt":
            if message.get("last", True) is not True:
                return  # partial transcripts: act on the final one
            text = str(message.get("voicePrompt") or "").strip()
            if not text or call.sid is None:
                log.warning("relay prompt ignored: %s", "no setup yet" if call.sid is None else "empty")
                return
            if len(call.tasks) >= MAX_TURNS_IN_FLIGHT:  # prompts faster than replies can even stop
                self.context.metrics.rejected.labels(CHANNEL, "busy").inc()
                log.warning("relay prompt refused on call %s: %d replies of this call are still running",
                            call.sid, len(call.tasks))
                return
            if call.sink is not None and call.task is not None and not call.task.done():
                call.sink.cut(None)  # a new prompt while the last reply still speaks: that reply stops here
            call.sink = RelaySink(ws)
            call.task = asyncio.ensure_future(self._turn(ws, call, call.sink, text))
            call.tasks.add(call.task)
            call.task.add_done_callback(call.tasks.discard)
        elif kind == "interrupt":
            if call.sink is not None:
                heard = message.get("utteranceUntilInterrupt")
                call.sink.cut(str(heard) if heard is not None else None)
        elif kind in ("dtmf", "info"):
            log.info("relay %s on call %s: %s", kind, call.sid, message.get("digit", ""))
        elif kind == "error":
            log.warning("relay error on call %s: %s", call.sid, message.get("description", message))
        else:
            log.warning("relay message ignored (not a ConversationRelay message): %.200s", raw)

    async def _expect(self, call: _Call) -> None:
        try:
            await self.context.pipeline.expect(f"phone:{call.caller}")
        except Exception as exc:  # only a head start: the first turn resolves the caller itself
            log.warning("relay call %s: could not resolve the caller before the first prompt: %s", call.sid, exc)

    async def _turn(self, ws: WebSocket, call: _Call, sink: RelaySink, text: str) -> None:
        try:
            if call.expected is not None and not call.expected.done():
                await asyncio.wait([call.expected])  # one resolution of a new caller, not two racing
            if not self.capabilities.handoff and self._asks_for_person(text):
                await ws.send_json({"type": "text", "token": self.settings.twilio_handoff_unavailable, "last": True})
                return
            inbound = InboundMessage(channel=CHANNEL, external_user_id=call.caller,
                                     external_message_id=f"{call.sid}:{uuid.uuid4().hex}",
                                     identity=f"phone:{call.caller}", text=text, thread=call.sid or "")
            turn = await self.context.pipeline.accept(inbound, rag_mode=self.capabilities.rag_mode)
            if turn is None:
                return
            outcome = await self.context.pipeline.run(turn, sink)
            if outcome.turn.trace.handoff and not sink.interrupted.is_set():
                await ws.send_json({"type": "end", "handoffData": _HANDOFF_DATA})
        except (WebSocketDisconnect, RuntimeError):  # the socket closed under the reply
            log.info("relay call %s: the socket closed during a reply", call.sid)
        except Exception:  # the top of a call's turn: log it; the caller hears nothing more for this prompt
            log.exception("relay turn failed on call %s", call.sid)

    def _asks_for_person(self, text: str) -> bool:
        spoken = " ".join(text.lower().split())
        return any(phrase in spoken for phrase in self._phrases)

    def router(self) -> APIRouter:
        router = APIRouter()
        router.add_api_websocket_route(RELAY_PATH, self.socket)
        return router


def build(context: ChannelContext) -> TwilioRelayAdapter | None:
    settings = context.settings
    if settings.twilio_voice_mode != "relay" or not (settings.twilio_account_sid and settings.twilio_auth_token):
        return None
    return TwilioRelayAdapter(context)

"""Phone calls over Twilio ConversationRelay: Twilio turns speech into text and text into speech on its
side and talks to us over one WebSocket per call (``/channels/twilio/relay`` for the environment's number,
``/channels/twilio/<id>/relay`` for a connection's: ``channels.twilio.line``).

The upgrade must be signed by Twilio over the full URL and carry the call's single-use ticket
(``channels.twilio.relay_tickets``): the socket serves that call and caller only, and a ``setup`` naming
another is refused. Each final ``prompt`` runs one turn of the shared pipeline (knowledge context inline
by default, the handoff gate, traces, memory). The model's deltas go back as ``text`` tokens in whole
words, markdown and citation markers stripped, so the caller hears the first words while the model still
writes. An ``interrupt`` (the caller barged in) cancels the model's stream at once and stores only what
the caller heard. Keys the caller presses (``dtmf``) are a turn's text, ``[pressed 1]`` (``channels.twilio.keypad``).
Until the caller's language is known, each utterance is checked against ``SWITCHBOARD_TWILIO_RELAY_LANGUAGES``
and one in another of them switches the call (a ``language`` message); the model is told to answer in it
(``channels.twilio.caller_language``), and a handoff is said in it (``channels.twilio.handoff_phrasebook``).
A request for a person ends the session with ``handoffData`` carrying a two-line summary of the call
(``channels.twilio.call_summary``, also kept with the handoff for the console);
the ``<Connect action>`` webhook then dials ``SWITCHBOARD_TWILIO_HANDOFF_NUMBER``, whispering the summary to
the person before the caller is connected (``channels.twilio.voice``). A socket is bounded:
a setup deadline, an idle limit, caps on sockets per caller and in all, a frame size, a prompt length.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
import weakref
from contextlib import suppress
from dataclasses import dataclass, field

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from twilio.request_validator import RequestValidator

from channels.connection_capabilities import relay_capabilities
from channels.twilio.call_summary import CallTranscript
from channels.twilio.caller_language import CallLanguage, parse_languages
from channels.twilio.handoff_phrasebook import handoff_message, handoff_unavailable
from channels.twilio.keypad import Keypad
from channels.twilio.line import Line
from channels.twilio.relay_sink import CHANNEL, MAX_WORD_CHARS, RelaySink, speakable
from channels.twilio.relay_tickets import (
    RELAY_PATH,
    TICKET_PARAM,
    RelayTicket,
    RelayTickets,
    relay_url,
    remember_language,
)
from gateway.channel import (
    ChannelContext,
    InvalidJSON,
    Turn,
    decode_json,
)

__all__ = ["CHANNEL", "MAX_TURNS_IN_FLIGHT", "MAX_WORD_CHARS", "RELAY_PATH", "RelaySink", "TwilioRelayAdapter",
           "build", "relay_of", "relay_url", "speakable"]

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "x-twilio-signature"
HANDOFF_REASON_CODE = "live-agent-handoff"
MAX_TURNS_IN_FLIGHT = 3  # a call's replies still running (cut or not); a prompt past them is refused
# close codes (RFC 6455): the reason goes with them
CLOSE_IDLE, CLOSE_POLICY, CLOSE_BAD_DATA, CLOSE_TOO_BIG, CLOSE_TRY_LATER = 1000, 1008, 1007, 1009, 1013


@dataclass
class _Call:
    ticket: RelayTicket
    line: Line
    sid: str | None = None  # set by an accepted ``setup``: prompts before it are ignored
    caller: str = ""
    sink: RelaySink | None = None
    task: asyncio.Task | None = None
    tasks: set[asyncio.Task] = field(default_factory=set)
    expected: asyncio.Task | None = None  # the caller's persona, resolved while the welcome greeting plays
    language: CallLanguage | None = None  # what recognition and voice speak now, and whether it is settled
    keypad: Keypad | None = None
    transcript: CallTranscript = field(default_factory=CallTranscript)  # for a transfer's summary


class _OpenSockets:
    """The relay sockets this process holds, per caller number and in all; one past a cap is refused."""

    def __init__(self, total: int, per_caller: int) -> None:
        self.max_total, self.max_per_caller = total, per_caller
        self.total = 0
        self.by_caller: dict[str, int] = {}

    def take(self, caller: str) -> str | None:
        """None: taken (``release`` it); else why not."""
        if self.total >= self.max_total:
            return f"too many relay sockets on this gateway (limit {self.max_total})"
        if self.by_caller.get(caller, 0) >= self.max_per_caller:
            return f"too many relay sockets for this caller (limit {self.max_per_caller})"
        self.total += 1
        self.by_caller[caller] = self.by_caller.get(caller, 0) + 1
        return None

    def release(self, caller: str) -> None:
        self.total -= 1
        left = self.by_caller.pop(caller, 1) - 1
        if left:
            self.by_caller[caller] = left


class TwilioRelayAdapter:
    name = CHANNEL

    def __init__(self, context: ChannelContext) -> None:
        self.context = context
        self.settings = context.settings
        self.capabilities = relay_capabilities(self.settings)
        self._phrases = [p.strip().lower() for p in self.settings.handoff_phrases.split("|") if p.strip()]
        self.tickets = RelayTickets(context)
        self.open = _OpenSockets(self.settings.twilio_relay_max_sockets,
                                 self.settings.twilio_relay_max_sockets_per_caller)

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    @staticmethod
    def _signed(ws: WebSocket, public_url: str, auth_token: str | None) -> bool:
        """Twilio signs the URL it was given: this path under the public URL, the ticket's query included."""
        signature = ws.headers.get(SIGNATURE_HEADER, "")
        url = relay_url(public_url, ws.url.path) + (f"?{ws.url.query}" if ws.url.query else "")
        return bool(auth_token and signature and RequestValidator(auth_token).validate(url, {}, signature))

    async def _admit(self, ws: WebSocket, line: Line) -> RelayTicket | None:
        """The call this upgrade may serve; None (counted and logged) when it may serve none."""
        if not self._signed(ws, self.settings.public_url, line.auth_token):
            self.context.metrics.rejected.labels(CHANNEL, "signature").inc()
            log.warning("relay socket refused: missing or wrong %s", SIGNATURE_HEADER)
            return None
        ticket = await self.tickets.consume(ws.query_params.get(TICKET_PARAM, ""))
        if ticket is None or ticket.connection_id != line.connection_id:  # a ticket opens its own number's socket
            self.context.metrics.rejected.labels(CHANNEL, "ticket").inc()
            log.warning("relay socket refused: no ticket, or one unknown, expired, already used or for another number")
            return None
        return ticket

    async def socket(self, ws: WebSocket) -> None:
        """The environment number's calls (``SWITCHBOARD_TWILIO_AUTH_TOKEN`` signs them)."""
        await self.serve(ws, Line.environment(self.settings))

    async def serve(self, ws: WebSocket, line: Line) -> None:
        """One relay socket of ``line``: signed with its auth token (a connection's account, or the
        environment's) and opened with a ticket ``issue_relay_url`` gave for a call to that line."""
        ticket = await self._admit(ws, line)
        if ticket is None:
            await ws.close(code=CLOSE_POLICY)  # before the accept: the upgrade is refused (403)
            return
        await ws.accept()
        call = _Call(ticket=ticket, line=line, language=CallLanguage(
            self.settings.voice_language, parse_languages(self.settings.twilio_relay_languages), ticket.language))
        refused = self.open.take(ticket.caller)
        if refused is not None:
            await self._close(ws, call, CLOSE_TRY_LATER, refused, "capacity")
            return
        try:
            await self._serve(ws, call)
        finally:
            self.open.release(ticket.caller)

    async def _serve(self, ws: WebSocket, call: _Call) -> None:
        call.keypad = Keypad(self.settings.twilio_relay_dtmf_window_s, lambda text: self._keys(ws, call, text))
        try:
            while (raw := await self._receive(ws, call)) is not None and await self._message(ws, call, raw):
                pass
        except WebSocketDisconnect:
            pass
        finally:
            keypad, call.keypad = call.keypad, None  # it refers to the call: no cycle left for the collector
            if keypad is not None:
                await keypad.close()
            if call.sink is not None and call.task is not None and not call.task.done():
                call.sink.hang_up()  # the transcript keeps what was said; nothing is said again
            running = [*call.tasks, *([call.expected] if call.expected is not None else [])]
            if running:
                await asyncio.gather(*running, return_exceptions=True)

    async def _receive(self, ws: WebSocket, call: _Call) -> str | bytes | None:
        """The next frame; None once the socket is closed for sending no ``setup`` or going quiet."""
        while True:
            waiting = call.sid is None
            settings = self.settings
            timeout = settings.twilio_relay_setup_timeout_s if waiting else settings.twilio_relay_idle_timeout_s
            try:
                message = await asyncio.wait_for(ws.receive(), timeout)
            except TimeoutError:
                if not waiting and call.tasks:
                    continue  # a reply is still being spoken: the call is not idle
                reason = f"no setup within {timeout:g} s" if waiting else f"idle for {timeout:g} s"
                await self._close(ws, call, CLOSE_POLICY if waiting else CLOSE_IDLE, reason,
                                  "setup" if waiting else "idle")
                return None
            if message["type"] == "websocket.disconnect":
                code = message.get("code", 1000)
                if code == CLOSE_TOO_BIG:  # the server's bound (gateway.http.server.ws_max_size) closed it
                    self.context.metrics.rejected.labels(CHANNEL, "frame").inc()
                    log.warning("relay socket of call %s closed (1009): %.120s", call.ticket.call_sid,
                                message.get("reason") or "a frame past the server's WebSocket limit")
                raise WebSocketDisconnect(code)
            text = message.get("text")
            return text if text is not None else message.get("bytes") or b""

    async def _close(self, ws: WebSocket, call: _Call, code: int, reason: str, counted_as: str) -> None:
        self.context.metrics.rejected.labels(CHANNEL, counted_as).inc()
        log.warning("relay socket of call %s closed (%d): %s", call.ticket.call_sid, code, reason)
        with suppress(RuntimeError, WebSocketDisconnect):  # the other side may have gone already
            await ws.close(code=code, reason=reason.encode()[:120].decode(errors="ignore"))

    async def _frame(self, ws: WebSocket, call: _Call, raw: str | bytes) -> dict | None:
        """The frame as a JSON object; None after closing the socket on one that is too big or not one."""
        size = len(raw) if isinstance(raw, bytes) else len(raw.encode(errors="replace"))
        limit = self.settings.twilio_relay_max_frame_bytes
        if size > limit:
            await self._close(ws, call, CLOSE_TOO_BIG, f"frame of {size} bytes; the limit is {limit}", "frame")
            return None
        try:
            message = decode_json(raw, where="frame")
        except InvalidJSON as exc:
            await self._close(ws, call, CLOSE_BAD_DATA, exc.message, "frame")
            return None
        if not isinstance(message, dict):
            await self._close(ws, call, CLOSE_BAD_DATA, "frame: not a JSON object", "frame")
            return None
        return message

    async def _message(self, ws: WebSocket, call: _Call, raw: str | bytes) -> bool:
        """Act on one frame; False once the socket is closed."""
        message = await self._frame(ws, call, raw)
        if message is None:
            return False
        kind = message.get("type")
        if kind == "setup":
            return await self._setup(ws, call, message)
        if kind == "prompt":
            await self._prompt(ws, call, message)
        elif kind == "dtmf":
            await self._dtmf(call, message)
        elif kind == "interrupt":
            if call.sink is not None:
                heard = message.get("utteranceUntilInterrupt")
                call.sink.cut(str(heard) if heard is not None else None)
        elif kind == "info":
            log.debug("relay info on call %s", call.sid)
        elif kind == "error":
            log.warning("relay error on call %s: %.200s", call.sid, message.get("description", message))
        else:
            log.warning("relay message ignored (not a ConversationRelay message): %.200s", raw)
        return True

    async def _setup(self, ws: WebSocket, call: _Call, message: dict) -> bool:
        """The call and caller are the ticket's (from the signed webhook); a setup naming others is refused."""
        sid, caller = str(message.get("callSid") or ""), str(message.get("from") or "")
        if (sid, caller) != (call.ticket.call_sid, call.ticket.caller):
            log.warning("relay setup refused: it names call %.64s%s, the socket's ticket is for call %s",
                        sid, "" if caller == call.ticket.caller else " and another caller", call.ticket.call_sid)
            await self._close(ws, call, CLOSE_POLICY, "setup names another call or caller than this socket's call",
                              "setup")
            return False
        call.sid, call.caller = sid, caller
        log.info("relay session for call %s", call.sid)
        if call.caller and call.expected is None:
            call.expected = asyncio.ensure_future(self._expect(call))  # not a reply: not in ``tasks``' bound
        return True

    async def _prompt(self, ws: WebSocket, call: _Call, message: dict) -> None:
        if message.get("last", True) is not True:
            return  # partial transcripts: act on the final one
        text = str(message.get("voicePrompt") or "").strip()
        if not text or call.sid is None:
            log.warning("relay prompt ignored: %s", "no setup yet" if call.sid is None else "empty")
            return
        limit = self.settings.max_message_chars
        if len(text) > limit:
            self.context.metrics.rejected.labels(CHANNEL, "too_long").inc()
            log.warning("relay prompt refused on call %s: %d characters; the limit is %d", call.sid, len(text), limit)
            return
        await self._follow_language(ws, call, text, message.get("lang"))
        self._start(ws, call, text)

    async def _dtmf(self, call: _Call, message: dict) -> None:
        if call.sid is None or call.keypad is None:
            log.warning("relay dtmf ignored: no setup yet")
        elif not await call.keypad.press(str(message.get("digit") or "")):
            log.warning("relay dtmf ignored on call %s: not a phone key", call.sid)

    async def _keys(self, ws: WebSocket, call: _Call, text: str) -> None:
        """The keys the caller pressed (``[pressed 1]``), answered as if said."""
        self._start(ws, call, text)

    async def _follow_language(self, ws: WebSocket, call: _Call, text: str, lang: object) -> None:
        """An utterance in another of the line's languages switches recognition and voice to it."""
        choice = call.language.heard(text, lang if isinstance(lang, str) else None) if call.language else None
        if choice is not None:
            log.info("relay call %s: the caller speaks %s (%s); switching", call.sid, choice.code, choice.why)
            await ws.send_json({"type": "language", "ttsLanguage": choice.code, "transcriptionLanguage": choice.code})
            await remember_language(self.context, call.ticket, choice.code)  # for the call's next relay session

    def _start(self, ws: WebSocket, call: _Call, text: str) -> None:
        """One turn for what the caller said (or pressed); the reply still speaking stops here."""
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

    async def _expect(self, call: _Call) -> None:
        try:
            await self.context.pipeline.expect(call.line.identity(call.caller))
        except Exception as exc:  # only a head start: the first turn resolves the caller itself
            log.warning("relay call %s: could not resolve the caller before the first prompt: %s", call.sid, exc)

    async def _turn(self, ws: WebSocket, call: _Call, sink: RelaySink, text: str) -> None:
        try:
            if call.expected is not None and not call.expected.done():
                await asyncio.wait([call.expected])  # one resolution of a new caller, not two racing
            inbound = call.line.inbound(CHANNEL, call.caller, f"{call.sid}:{uuid.uuid4().hex}", text, call.sid or "")
            turn = await self.context.pipeline.accept(inbound, rag_mode=self.capabilities.rag_mode)
            if turn is None:
                return
            asks_for_person = self._asks_for_person(text)
            spoken = call.language.code if call.language is not None and call.language.known else None
            if not self.capabilities.handoff and asks_for_person:  # no one to transfer to: no model either
                turn.answer = handoff_unavailable(self.settings, spoken)
            turn.handoff_message = handoff_message(self.settings, spoken)
            if call.language is not None and call.language.name:
                turn.prompt_variables["caller_language"] = call.language.name
            call.transcript.caller(text)
            outcome = await self.context.pipeline.run(turn, call.line.sink(sink, self.context))
            if not outcome.turn.trace.handoff:  # "I'm passing you to a colleague" is no part of the summary
                call.transcript.assistant(sink.heard if sink.interrupted.is_set() else outcome.sent_text or "")
            elif not sink.interrupted.is_set():
                data = await self._handoff_data(call, outcome.turn, asks_for_person)
                await ws.send_json({"type": "end", "handoffData": data})
        except (WebSocketDisconnect, RuntimeError):  # the socket closed under the reply
            log.info("relay call %s: the socket closed during a reply", call.sid)
        except Exception:  # the top of a call's turn: log it; the caller hears nothing more for this prompt
            log.exception("relay turn failed on call %s", call.sid)

    async def _handoff_data(self, call: _Call, turn: Turn, asked_for_person: bool) -> str:
        """The ``end``'s ``handoffData``: why, and the two lines the operator hears before the caller
        (``channels.twilio.call_summary``), also kept with the handoff for the console."""
        summary, question = call.transcript.summary(call.caller, asked_for_person=asked_for_person)
        handoffs = self.context.pipeline.handoffs
        if handoffs is not None:
            await handoffs.note_summary(turn.conversation.id, f"{summary}\n{question}")
        return json.dumps({"reason": turn.trace.handoff or "the caller asked for a person",
                           "reasonCode": HANDOFF_REASON_CODE, "summary": summary, "question": question})

    def _asks_for_person(self, text: str) -> bool:
        spoken = " ".join(text.lower().split())
        return any(phrase in spoken for phrase in self._phrases)

    def router(self) -> APIRouter:
        router = APIRouter()
        router.add_api_websocket_route(RELAY_PATH, self.socket)
        return router


_RELAYS: weakref.WeakValueDictionary[int, TwilioRelayAdapter] = weakref.WeakValueDictionary()


def relay_of(context: ChannelContext) -> TwilioRelayAdapter:
    """The gateway's one relay (per context, while anything holds it): the environment's number and every
    voice connection share its socket caps."""
    adapter = _RELAYS.get(id(context))
    if adapter is None:
        adapter = _RELAYS[id(context)] = TwilioRelayAdapter(context)
    return adapter


def build(context: ChannelContext) -> TwilioRelayAdapter | None:
    settings = context.settings
    if settings.twilio_voice_mode != "relay" or not (settings.twilio_account_sid and settings.twilio_auth_token):
        return None
    return relay_of(context)

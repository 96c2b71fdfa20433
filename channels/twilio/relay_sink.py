"""What a relay call hears of a turn's reply: the model's deltas as ``text`` tokens in whole words, markdown
and citation markers stripped, stopped at once when the caller cuts in (``channels.twilio.relay``)."""

from __future__ import annotations

import asyncio
import re
from contextlib import suppress

from fastapi import WebSocket, WebSocketDisconnect

from gateway.channel import HANDOFF_MARKER, DeliveryReport, ToolEvent

__all__ = ["CHANNEL", "FILLER", "FILLER_AFTER_S", "MAX_WORD_CHARS", "RelaySink", "speakable"]

CHANNEL = "twilio_relay"
# the model's handoff signal is read by the pipeline, never said
_MARKUP = re.compile(rf"{re.escape(HANDOFF_MARKER)}|\[\d+\]|[*_`#>]+|\[([^\]]*)\]\([^)]*\)")
MAX_WORD_CHARS = 64  # a "word" longer than this (no space in sight) is spoken as it stands


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


FILLER = "One moment while I check. "  # said once a turn when a tool call runs longer than FILLER_AFTER_S
FILLER_AFTER_S = 1.0


class RelaySink:
    """Speaks a turn's reply on the call's socket; stops at once when the caller interrupts. A tool call
    still running after ``FILLER_AFTER_S`` makes the caller hear ``FILLER`` (once: the sink is the turn's),
    so the line is not silent; it is not part of the reply (not stored as said)."""

    streaming = True
    channel = CHANNEL

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.words = _Words()
        self.spoken = ""  # every token sent, for a socket that drops mid-reply
        self.heard = ""  # what the caller heard before cutting in (Twilio's utteranceUntilInterrupt)
        self.interrupted = asyncio.Event()
        self.streamed = False
        self.left = False  # the caller hung up before the reply was finished (insight: abandoned)
        self.running_tools = 0
        self.filler: asyncio.Task | None = None  # waiting to say FILLER; done once said (or not needed)

    async def tool_event(self, event: ToolEvent) -> None:
        self.running_tools += 1 if event.kind == "call" else -1
        if event.kind == "call" and self.filler is None:
            self.filler = asyncio.ensure_future(self._fill())
        elif self.running_tools <= 0 and self.filler is not None and not self.filler.done():
            self.filler.cancel()
            self.filler = None  # a later call this turn may still need it

    async def _fill(self) -> None:
        await asyncio.sleep(FILLER_AFTER_S)
        if self.running_tools > 0 and not self.interrupted.is_set():
            with suppress(WebSocketDisconnect, RuntimeError):
                await self.ws.send_json({"type": "text", "token": FILLER, "last": False})

    async def _send(self, token: str, last: bool) -> None:
        if self.interrupted.is_set():
            return
        said = self.spoken
        self.spoken += token  # counted as it goes: a cut while it is on its way keeps it
        try:
            await self.ws.send_json({"type": "text", "token": token, "last": last})
        except (WebSocketDisconnect, RuntimeError):
            self.spoken = said  # it did not go out
            raise

    async def delta(self, text: str) -> None:
        self.streamed = True
        token = self.words.feed(text)
        if token.strip():
            try:
                await self._send(token, last=False)
            except (WebSocketDisconnect, RuntimeError):
                # The socket closed under the reply before the call's loop saw it close: the reply ends with what
                # went out, as when the caller cuts in. (Raised into the model's stream, it failed the reply and
                # the transcript kept the fallback message instead of what the caller heard.)
                self.cut(None)

    async def deliver(self, text: str) -> DeliveryReport:
        if self.filler is not None and not self.filler.done():
            self.filler.cancel()
        if self.interrupted.is_set():  # what was heard is stored, marked interrupted; nothing more is said
            return DeliveryReport(delivered=True, interrupted=True, left=self.left)
        # A reply whose stream said nothing (only the handoff signal) is said as the turn ends it: the handoff message
        tail = self.words.rest() if self.streamed and self.spoken.strip() else speakable(text)
        try:
            await self._send(tail, last=True)
        except (WebSocketDisconnect, RuntimeError) as exc:  # the call's socket went away
            return DeliveryReport(delivered=False, error=f"relay socket closed: {exc}", retryable=False, left=True)
        return DeliveryReport(delivered=True)

    def cut(self, heard: str | None) -> None:
        self.heard = heard if heard is not None else self.spoken
        self.interrupted.set()

    def hang_up(self) -> None:
        """The call's socket closed while this reply was being spoken: the caller left mid-answer."""
        self.left = True
        self.cut(None)

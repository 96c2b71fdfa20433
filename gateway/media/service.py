"""A chat message with media, made into a turn (issue 44): a voice note becomes its transcript, a photo
reaches a vision model as an image, a document's text is given to the model for this turn; or, when
the media cannot be used, a polite answer instead of a turn.

Channels say where each file is (``MediaSource``) and hand the message here instead of to the pipeline;
the polite answer (``Refused``) is theirs to record and send, as they do for media they never read.
Nothing is written to disk (``SWITCHBOARD_KEEP_MEDIA`` aside): the media lives in the turn's memory."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from gateway.core.errors import GatewayError
from gateway.core.models import InboundMessage, ModelCallTrace, PromptMessage
from gateway.core.settings import Settings
from gateway.media.conversation_documents import DOCUMENT_NOTE, ConversationDocuments
from gateway.media.documents import ChatDocuments
from gateway.media.download import Media, MediaDownloader, MediaSource, MediaTooLarge
from gateway.media.images import data_url
from gateway.media.speech import Speech, TooLong, is_audio
from gateway.turn.llm import CallOptions, LLMClient
from gateway.turn.media_parts import TurnMedia
from gateway.turn.pipeline import OpeningWrites, Turn, TurnPipeline

__all__ = ["ChatMedia", "Refused"]

log = logging.getLogger(__name__)

AUDIO = ("voice", "audio", "video_note")
DESCRIBE = ("Describe this image in one short line, the way a customer's question about it would be "
            "searched for (what it shows, any product, part or text visible). No preamble.")
_WORDS = {"voice": "a voice note", "audio": "an audio file", "video_note": "a video note", "photo": "a photo",
          "document": "a document"}


@dataclass(frozen=True)
class Refused:
    """No turn: ``inbound`` (the media said in words) is recorded and ``answer`` sent instead."""

    inbound: InboundMessage
    answer: str
    reason: str


@dataclass
class _Made:
    said: list[str] = field(default_factory=list)  # the turn's text, piece by piece
    notes: list[str] = field(default_factory=list)  # what was made of each file (transcript, trace)
    images: list[str] = field(default_factory=list)
    documents: list[tuple[str, str]] = field(default_factory=list)
    remarks: list[str] = field(default_factory=list)
    calls: list[ModelCallTrace] = field(default_factory=list)


class ChatMedia:
    def __init__(self, settings: Settings, pipeline: TurnPipeline, downloader: MediaDownloader, speech: Speech,
                 documents: ChatDocuments, vision: Callable[[str | None], Awaitable[bool]],
                 model: Callable[[str | None], Awaitable[str | None]], llm: LLMClient | None,
                 kept: ConversationDocuments | None = None) -> None:
        self.settings = settings
        self.pipeline = pipeline
        self.downloader = downloader
        self.speech = speech
        self.documents = documents
        self.vision = vision
        self.model = model  # the answering agent's own model (``llmModelId``); None from it: SWITCHBOARD_LLM_MODEL
        self.llm = llm
        self.kept = kept  # documents stay with their conversation for its later turns

    async def accept(self, inbound: InboundMessage, sources: Sequence[MediaSource], *,
                     delivery_id: str | None = None, opening: OpeningWrites | None = None) -> Turn | Refused | None:
        """The message as a turn (None: a duplicate), or a polite answer instead; ``delivery_id`` and
        ``opening`` as ``TurnPipeline.accept`` takes them."""
        started = time.perf_counter()
        made = _Made(said=[inbound.text] if inbound.text.strip() else [])
        for source in sources:
            try:
                refusal = await self._one(inbound, source, made)
            except MediaTooLarge as exc:
                refusal = self._polite(exc, f"That file is too large for me (over {self.settings.media_max_mb:g} MB). "
                                            "Please send a smaller one, or type your question.")
            except TooLong as exc:
                refusal = self._polite(exc, f"That voice note is too long for me (over "
                                            f"{self.settings.stt_max_seconds:g} seconds). Please send a "
                                            "shorter one, or type your question.")
            except GatewayError as exc:
                refusal = self._polite(exc, "Sorry, I could not read that file. Please try again, or type "
                                            "your question.")
            if refusal is not None:
                answer, reason = refusal
                return Refused(self._described(inbound, sources), answer, reason)
        text = "\n".join(made.said).strip()
        if not text:
            return Refused(self._described(inbound, sources), self.settings.channel_unsupported_message,
                           "nothing to answer in the media")
        rewritten = inbound.model_copy(update={"text": text, "media": "; ".join(made.notes) or None})
        turn = await self.pipeline.accept(rewritten, delivery_id=delivery_id, opening=opening)
        if turn is None:
            return None
        if made.documents and self.kept is not None:
            await self.kept.add(turn.conversation.id, made.documents)
        turn.trace.media = made.notes
        turn.trace.model_calls.extend(made.calls)
        if made.images or made.documents or made.remarks:
            turn.media = TurnMedia(tuple(made.images), tuple(made.documents), tuple(made.remarks))
        log.info("turn %s: media made ready in %.0f ms (%s)", turn.trace.turn_id,
                 (time.perf_counter() - started) * 1000, "; ".join(made.notes))
        return turn

    @staticmethod
    def _polite(exc: GatewayError, answer: str) -> tuple[str, str]:
        log.info("media refused: %s", exc.message)
        return answer, exc.message

    def _described(self, inbound: InboundMessage, sources: Sequence[MediaSource]) -> InboundMessage:
        said = [f"[{_WORDS.get(s.kind, s.kind)}{f' {s.filename!r}' if s.filename else ''}]" for s in sources]
        if inbound.text.strip():
            said.append(inbound.text.strip())
        return inbound.model_copy(update={"text": " ".join(said)})

    async def _one(self, inbound: InboundMessage, source: MediaSource, made: _Made) -> tuple[str, str] | None:
        if source.kind in AUDIO:
            return await self._audio(source, made)
        if source.kind == "photo":
            return await self._photo(inbound, source, made)
        return await self._document(inbound, source, made)

    async def _audio(self, source: MediaSource, made: _Made) -> tuple[str, str] | None:
        if not self.speech.configured:
            return self.settings.channel_unsupported_message, "no speech-to-text server configured"
        cap = self.settings.stt_max_seconds
        if source.declared_seconds is not None and source.declared_seconds > cap:
            raise TooLong(f"the voice note is {source.declared_seconds:.0f} s long by the vendor's word, over "
                          f"SWITCHBOARD_STT_MAX_SECONDS ({cap:g} s); not downloaded")
        media = await self.downloader.fetch(source)
        if not is_audio(media.mime_type):
            raise _NotWhatItSays(f"the voice note's bytes are {media.mime_type}, not audio")
        transcript = await self.speech.transcribe(media, source.declared_seconds)
        if not transcript.text:
            return "Sorry, I could not make out any words in that voice note.", "empty transcript"
        made.said.insert(0, transcript.text)
        length = f"{transcript.seconds:.1f} s" if transcript.seconds is not None else "length unknown"
        made.notes.append(f"{_WORDS.get(source.kind, source.kind)}, transcribed ({length}, {self.settings.stt_model})")
        return None

    async def _photo(self, inbound: InboundMessage, source: MediaSource, made: _Made) -> tuple[str, str] | None:
        if not await self.vision(inbound.agent):
            if not made.said:
                return ("I can't see photos, sorry: please describe what it shows in words.",
                        "the agent's model is not marked vision-capable (config.vision)")
            # its caption is the question; the model is told there is a photo it cannot see
            made.remarks.append("[The customer also sent a photo, which you cannot see: if the answer depends on "
                                "it, say so and ask them to describe it in words.]")
            made.notes.append("a photo, not shown to the model (config.vision is off)")
            return None
        media = await self.downloader.fetch(source)
        if not media.mime_type.startswith("image/"):
            raise _NotWhatItSays(f"the photo's bytes are {media.mime_type}, not an image")
        image = await data_url(media.data, self.settings.media_image_max_px)
        made.images.append(image)
        if not made.said and self.llm is not None:  # no caption: what retrieval searches for is the model's line
            # the agent's model: the one marked as seeing images (config.vision), not the gateway's default
            model = await self.model(inbound.agent) or self.llm.model
            described = await self.llm.complete([PromptMessage(role="system", content=DESCRIBE),
                                                 PromptMessage(role="user", content="", images=(image,))],
                                                CallOptions(model=model))
            made.calls.append(ModelCallTrace(kind="image_description", model=model,
                                             prompt_tokens=described.usage.prompt_tokens,
                                             completion_tokens=described.usage.completion_tokens))
            line = " ".join(described.text.split())[:300]
            made.said.append(f"(a photo: {line})")
            made.notes.append(f"a photo, described by the model: {line}")
        else:
            made.notes.append("a photo, shown to the model")
        return None

    async def _document(self, inbound: InboundMessage, source: MediaSource, made: _Made) -> tuple[str, str] | None:
        media: Media = await self.downloader.fetch(source)
        text, cut = await self.documents.text(media)
        name = source.filename or "document"
        made.documents.append((name, text))
        if not made.said:
            made.said.append(f"(the document {name!r})")
        made.notes.append(f"{DOCUMENT_NOTE}{name!r}, {len(text):,} characters given to the model"
                          + (f" (cut to SWITCHBOARD_CHAT_DOCUMENT_MAX_TOKENS={self.settings.chat_document_max_tokens})"
                             if cut else ""))
        return None

    async def aclose(self) -> None:
        await self.downloader.aclose()
        await self.speech.aclose()


class _NotWhatItSays(GatewayError):
    """The bytes are not the kind of file the vendor called them."""

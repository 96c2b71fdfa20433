"""Voice notes to text (and, optionally, text to a voice note) through an OpenAI-compatible server:
``{SWITCHBOARD_STT_BASE_URL}/audio/transcriptions`` and ``/audio/speech``.

The audio's length is read from its own header (mutagen) when the vendor did not say it, so a note
longer than ``SWITCHBOARD_STT_MAX_SECONDS`` is refused before it is sent anywhere."""

from __future__ import annotations

import asyncio
import io
import logging
from dataclasses import dataclass

import mutagen
import openai

from gateway.core.errors import GatewayError
from gateway.core.settings import Settings
from gateway.media.download import Media

__all__ = ["Speech", "SpeechFailed", "TooLong", "Transcript", "audio_seconds", "is_audio"]

log = logging.getLogger(__name__)
_EXTENSIONS = {
    "audio/ogg": "ogg", "audio/mpeg": "mp3", "audio/mp4": "m4a", "video/mp4": "mp4", "audio/x-wav": "wav",
    "audio/wav": "wav", "audio/webm": "webm", "video/webm": "webm", "audio/x-flac": "flac", "audio/amr": "amr",
    "audio/aac": "aac", "audio/m4a": "m4a",
}


class SpeechFailed(GatewayError):
    """The speech server could not turn the note into text (or text into a note)."""


class TooLong(GatewayError):
    """A voice note past ``SWITCHBOARD_STT_MAX_SECONDS``."""


@dataclass(frozen=True)
class Transcript:
    text: str
    seconds: float | None  # the audio's length, when known


def audio_seconds(data: bytes) -> float | None:
    """The audio's length by its own header; None when the format is not one mutagen reads."""
    try:
        parsed = mutagen.File(io.BytesIO(data))
    except Exception:  # mutagen raises its own errors per format: an unreadable header only means "unknown"
        return None
    length = getattr(getattr(parsed, "info", None), "length", None)
    return float(length) if length else None


def is_audio(mime_type: str) -> bool:
    return mime_type.startswith("audio/") or mime_type in ("video/webm", "video/mp4")


class Speech:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        base = settings.stt_base_url or (settings.llm_base_url if settings.llm_configured else None)
        key = settings.stt_api_key or settings.llm_api_key
        self.base_url = base
        self._client = None if base is None else openai.AsyncOpenAI(
            base_url=base, api_key=key.get_secret_value() if key else "unused",
            timeout=settings.llm_timeout_s, max_retries=1)

    @property
    def configured(self) -> bool:
        return self._client is not None

    async def transcribe(self, media: Media, declared_seconds: float | None = None) -> Transcript:
        """The note's words; ``TooLong`` past the cap (nothing sent), ``SpeechFailed`` when the server fails."""
        assert self._client is not None
        cap = self.settings.stt_max_seconds
        seconds = declared_seconds
        if seconds is None:
            seconds = await asyncio.to_thread(audio_seconds, media.data)
        if seconds is not None and seconds > cap:
            raise TooLong(f"the voice note is {seconds:.0f} s long, over SWITCHBOARD_STT_MAX_SECONDS ({cap:g} s)")
        name = f"{media.kind}.{_EXTENSIONS.get(media.mime_type, 'ogg')}"
        try:
            result = await self._client.audio.transcriptions.create(
                model=self.settings.stt_model, file=(name, media.data, media.mime_type))
        except openai.OpenAIError as exc:
            raise SpeechFailed(f"speech-to-text failed: {type(exc).__name__}") from exc
        return Transcript(" ".join((result.text or "").split()), seconds)

    async def speak(self, text: str) -> bytes:
        """``text`` as an OGG/Opus voice note (Telegram's ``sendVoice`` format)."""
        assert self._client is not None
        try:
            answer = await self._client.audio.speech.create(
                model=self.settings.tts_model, voice=self.settings.tts_voice, input=text[:4096],
                response_format="opus")
        except openai.OpenAIError as exc:
            raise SpeechFailed(f"text-to-speech failed: {type(exc).__name__}") from exc
        return answer.content

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()

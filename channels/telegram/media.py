"""Voice notes, photos and documents sent to a Telegram bot (issue 44): where each file is (``getFile``, then
the file URL the Bot API serves at ``{SWITCHBOARD_TELEGRAM_API_BASE}/file/bot<token>/<path>``, asked only
when the file is wanted and never stored), handed to the gateway's media service; a polite answer, recorded
in the transcript, when the media cannot be used."""

from __future__ import annotations

import logging
from functools import partial

from aiogram import Bot
from aiogram.types import BufferedInputFile

from channels.connection_capabilities import TELEGRAM
from channels.media_answer import media_turn_work
from channels.render import html_to_text, render
from channels.telegram.api import call as _call
from channels.telegram.updates import CHANNEL, READ_MEDIA, ChatTarget, ChatText, MediaMessage, Unsupported
from gateway.channel import (
    Attachment,
    ChannelContext,
    ChannelDeliveryError,
    GatewayError,
    InboundMessage,
    MediaSource,
    ReplySink,
    Turn,
    Work,
)

__all__ = ["media_sources", "media_work", "without_media"]

log = logging.getLogger(__name__)


def _source(bot: Bot, attachment: Attachment, api_base: str) -> MediaSource:
    file_id = attachment.file_id or ""

    async def locate() -> str:
        found = await _call(bot.get_file(file_id), "getFile")
        if not found.file_path:
            raise ChannelDeliveryError("telegram getFile gave no file path (the file is too big for the Bot API)")
        return bot.session.api.file_url(bot.token, found.file_path)

    return MediaSource(kind=attachment.kind, locate=locate, declared_size=attachment.size,
                       declared_seconds=attachment.seconds, filename=attachment.filename, vendor_base=api_base)


async def _speak(context: ChannelContext, bot: Bot, target: ChatTarget, text: str) -> None:
    """The reply as a voice note too (``SWITCHBOARD_VOICE_REPLY``); a failure is logged, the text stands."""
    assert context.media is not None
    try:
        spoken = " ".join(html_to_text(part) for part in render(text, TELEGRAM))
        audio = await context.media.speech.speak(spoken)
        await _call(bot.send_voice(target.chat_id, BufferedInputFile(audio, "reply.ogg"),
                                   message_thread_id=target.thread_id), "sendVoice")
    except (GatewayError, ChannelDeliveryError) as exc:
        log.warning("telegram voice reply not sent: %s", exc.message)


def media_sources(bot: Bot, event: MediaMessage, api_base: str) -> list[MediaSource]:
    return [_source(bot, a, api_base) for a in event.inbound.attachments if a.kind in READ_MEDIA and a.file_id]


def without_media(event: MediaMessage) -> ChatText | Unsupported:
    """The message as before media were read (no media service): its caption as text, else the plain answer."""
    if event.inbound.text:
        return ChatText(event.target, event.inbound)
    return Unsupported(event.target, event.inbound.attachments[0].kind)


async def media_work(context: ChannelContext, bot: Bot, event: MediaMessage, sink: ReplySink, *, api_base: str,
                     delivery_id: str | None, inbound: InboundMessage | None = None,
                     claim_id: str | None = None) -> Work | None:
    """The media message's turn, or its polite answer. ``inbound``: the message as the channel scoped it (a
    connection's), default the event's; ``claim_id``: what a polite answer is claimed under (default the update id)."""
    assert context.media is not None
    update_id = event.inbound.external_message_id
    outcome = await context.media.accept(inbound or event.inbound, media_sources(bot, event, api_base),
                                         delivery_id=delivery_id)
    spoken = any(a.kind in ("voice", "audio", "video_note") for a in event.inbound.attachments)
    if context.settings.voice_reply and spoken and isinstance(outcome, Turn) and hasattr(sink, "voice_reply"):
        sink.voice_reply = partial(_speak, context, bot, sink.target)  # a TelegramSink (not imported: a cycle)
    return await media_turn_work(context, outcome, sink, CHANNEL, ("update", claim_id or update_id),
                                 f"telegram media answer to update {update_id}")

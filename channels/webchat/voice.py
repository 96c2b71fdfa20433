"""A recording from the web chat widget's microphone button (issue 44): ``POST
/api/chat/sessions/{id}/voice`` with the audio as the body (what the browser's ``MediaRecorder`` made,
WebM or OGG/Opus; within ``SWITCHBOARD_MAX_BODY_BYTES``). The gateway's media service transcribes it and
the transcript is answered like a typed message; the response adds ``transcript``. Past the caps, or with
no speech-to-text server, the answer is the polite text and no turn runs."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from channels.media_answer import answer_media, record_media
from gateway.channel import (
    Attachment,
    ChannelContext,
    InboundMessage,
    InvalidInput,
    MediaSource,
    Refused,
    ReplySink,
    ServiceUnavailable,
    Turn,
)

__all__ = ["VOICE_PATH", "answer_recording"]

VOICE_PATH = "/api/chat/sessions/{session_id}/voice"


async def answer_recording(context: ChannelContext, session, data: bytes, sink: ReplySink, channel: str,
                           run: Callable[[str, Turn], Awaitable[dict]], save_into) -> dict:
    """The recording's turn answered (``run``), or the polite answer recorded and returned."""
    if context.media is None:
        raise ServiceUnavailable("voice messages are not available here")
    if not data:
        raise InvalidInput("the recording is empty")
    inbound = InboundMessage(channel=channel, external_user_id=session.id,
                             external_message_id=f"{session.id}:voice:{uuid.uuid4().hex}", identity=session.identity,
                             text="", thread=session.id, attachments=(Attachment(kind="voice"),))
    key = inbound.external_message_id
    outcome = await context.media.accept(inbound, [MediaSource(kind="voice", data=data, filename="recording")],
                                         opening=lambda pipe, accepted: save_into(pipe, key, accepted))
    if isinstance(outcome, Refused):
        where = await record_media(context, outcome.inbound)
        await answer_media(context, sink, channel, *where, text=outcome.answer)
        return {"reply": {"text": outcome.answer}, "sources": [], "turn_id": None, "transcript": None}
    assert outcome is not None  # a fresh message id is never a duplicate
    return {**await run(key, outcome), "transcript": outcome.inbound.text}

"""Telegram ``Update`` → what the adapter should do with it. The only place Telegram payloads are read.

A press of one of a reply's choice buttons (a ``callback_query`` whose data is ``ch:`` and a proposed
action's Yes / No) is the presser's next message, its text the choice; any other press (the rating
buttons) is a ``ButtonPress`` for the adapter's button handlers. Private chats always reach the bot; in groups only
messages that mention it (``@username`` or a text mention) or reply to one of its messages do. Captions
count as text; a voice note, audio file, photo or document is a ``MediaMessage`` (its caption the text); any
other message with no text (sticker, location …) gets a plain answer. File
URLs are never built here: attachments keep the ``file_id`` only (a download URL carries the bot token).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiogram.types import Message, Update, User

from gateway.channel import Attachment, InboundMessage

__all__ = [
    "CHOICE_PREFIX", "READ_MEDIA", "ButtonPress", "ChatText", "ChatTarget", "ChoicePress", "Ignored", "MediaMessage",
    "StartCommand", "TelegramEvent",
    "Unsupported", "chat_key", "read_update", "target_of",
]

CHANNEL = "telegram"
CHOICE_PREFIX = "ch:"  # a reply's choice buttons' data (a proposed action's Yes / No): ``ch:Yes``
_NON_TEXT = ("photo", "voice", "video_note", "video", "audio", "document", "sticker", "animation",
             "location", "venue", "contact", "poll", "dice")


@dataclass(frozen=True)
class ChatTarget:
    """Where a reply goes: the chat, the forum topic, and (in groups) the message it answers."""

    chat_id: int
    thread_id: int | None = None
    reply_to: int | None = None


@dataclass(frozen=True)
class Ignored:
    reason: str


@dataclass(frozen=True)
class Unsupported:
    target: ChatTarget
    kind: str


@dataclass(frozen=True)
class StartCommand:
    target: ChatTarget
    identity: str
    thread: str
    display_name: str | None


@dataclass(frozen=True)
class ChatText:
    target: ChatTarget
    inbound: InboundMessage


@dataclass(frozen=True)
class MediaMessage:
    """A voice note, audio file, photo or document (issue 44): ``inbound.text`` is its caption ("" without
    one), ``inbound.attachments`` say what came; the adapter hands it to the gateway's media service."""

    target: ChatTarget
    inbound: InboundMessage


@dataclass(frozen=True)
class ButtonPress:
    """A press on an inline keyboard button under one of the bot's messages (a callback query)."""

    query_id: str
    data: str
    identity: str  # who pressed it
    thread: str  # the chat (and topic) the message is in, as ``chat_key`` names it
    chat_id: int | None  # None: the message is too old for Telegram to say where it is
    message_id: int | None  # the bot's message the keyboard is under


@dataclass(frozen=True)
class ChoicePress(ChatText):
    """A press of one of a reply's choices (a proposed action's Yes / No, data ``CHOICE_PREFIX`` + the
    choice): the person's next message (``inbound``), once the press is answered (``callback_id``) and the
    keyboard taken off the bot's message (``chat_id``, ``message_id``)."""

    callback_id: str = ""
    chat_id: int = 0
    message_id: int = 0


TelegramEvent = Ignored | Unsupported | StartCommand | ChatText | MediaMessage | ButtonPress
READ_MEDIA = frozenset({"voice", "audio", "video_note", "photo", "document"})  # what the media service reads


def _attachments(msg: Message) -> tuple[Attachment, ...]:
    found = []
    if msg.photo:
        largest = max(msg.photo, key=lambda p: p.width * p.height)
        found.append(Attachment(kind="photo", file_id=largest.file_id, size=largest.file_size))
    for kind in ("voice", "video", "audio", "document", "animation", "video_note"):
        media = getattr(msg, kind)
        if media is not None:
            found.append(Attachment(kind=kind, file_id=media.file_id, mime_type=getattr(media, "mime_type", None),
                                    size=media.file_size, seconds=getattr(media, "duration", None),
                                    filename=getattr(media, "file_name", None)))
    if msg.sticker is not None:
        found.append(Attachment(kind="sticker", file_id=msg.sticker.file_id, description=msg.sticker.emoji))
    if msg.location is not None:
        found.append(Attachment(kind="location",
                                description=f"{msg.location.latitude},{msg.location.longitude}"))
    return tuple(found)


def _kind(msg: Message) -> str:
    return next((k for k in _NON_TEXT if getattr(msg, k, None)), "message")


def _addressed_to_bot(msg: Message, me: User) -> tuple[bool, str]:
    """Whether a group message is for the bot, and its text without the mention."""
    text = msg.text or msg.caption or ""
    entities = msg.entities or msg.caption_entities or []
    handle = f"@{me.username}".lower() if me.username else None
    mentions = []
    for entity in entities:
        piece = entity.extract_from(text)
        if entity.type == "mention" and handle and piece.lower() == handle:
            mentions.append(piece)
        elif entity.type == "text_mention" and entity.user and entity.user.id == me.id:
            mentions.append(piece)
        elif entity.type == "bot_command" and handle and piece.lower().endswith(handle):
            return True, text
    replied = msg.reply_to_message is not None and msg.reply_to_message.from_user is not None \
        and msg.reply_to_message.from_user.id == me.id
    for piece in mentions:
        text = text.replace(piece, "", 1)
    return bool(mentions) or replied, " ".join(text.split()) if mentions else text


def chat_key(update: Update) -> str:
    """The chat (and forum topic) an update belongs to: its deliveries are answered in order."""
    msg = update.message or update.edited_message
    if msg is None and update.callback_query is not None and isinstance(update.callback_query.message, Message):
        msg = update.callback_query.message  # a button pressed under the bot's message in that chat
    if msg is None:
        return "updates"
    topic = msg.message_thread_id if getattr(msg, "is_topic_message", None) else None
    return f"{msg.chat.id}:{topic}" if topic else str(msg.chat.id)


def _press(update: Update) -> ButtonPress | Ignored:
    query = update.callback_query
    assert query is not None
    if not query.data:
        return Ignored("a callback query without data (a game)")
    msg = query.message
    return ButtonPress(query.id, query.data, f"telegram:{query.from_user.id}", chat_key(update),
                       msg.chat.id if msg else None, msg.message_id if msg else None)


def target_of(msg: Message) -> ChatTarget:
    """Where the reply to ``msg`` goes: its chat and topic, and in groups the message it answers."""
    private = msg.chat.type == "private"
    topic = msg.message_thread_id if msg.is_topic_message else None
    return ChatTarget(msg.chat.id, topic, None if private else msg.message_id)


def _chosen(update: Update) -> TelegramEvent:
    press = update.callback_query
    assert press is not None
    msg = press.message
    if not isinstance(msg, Message) or not press.data or press.from_user.is_bot:
        return Ignored("button press without its message or data")
    topic = msg.message_thread_id if msg.is_topic_message else None
    inbound = InboundMessage(channel=CHANNEL, external_user_id=str(press.from_user.id),
                             external_message_id=str(update.update_id), identity=f"telegram:{press.from_user.id}",
                             text=press.data[len(CHOICE_PREFIX):][:64], thread=chat_key(update),
                             display_name=press.from_user.full_name)
    return ChoicePress(ChatTarget(msg.chat.id, topic), inbound, callback_id=press.id, chat_id=msg.chat.id,
                       message_id=msg.message_id)


def read_update(update: Update, me: User) -> TelegramEvent:
    if update.callback_query is not None:
        data = update.callback_query.data or ""
        return _chosen(update) if data.startswith(CHOICE_PREFIX) else _press(update)
    msg = update.message
    if msg is None:
        kind = "edit" if update.edited_message or update.edited_channel_post else "other update"
        return Ignored(kind)
    if msg.from_user is None or msg.from_user.is_bot:
        return Ignored("not from a person")
    private = msg.chat.type == "private"
    text = msg.text or msg.caption
    if private:
        addressed = True
    else:
        addressed, text = _addressed_to_bot(msg, me)
        if not addressed:
            return Ignored("group message not for the bot")
    target = target_of(msg)
    thread = chat_key(update)
    identity = f"telegram:{msg.from_user.id}"
    command = (text or "").strip().split("@", 1)[0].split(maxsplit=1)
    if command and command[0] == "/start":
        return StartCommand(target, identity, thread, msg.from_user.full_name)
    attachments = _attachments(msg)
    if any(a.kind in READ_MEDIA for a in attachments):
        return MediaMessage(target, InboundMessage(
            channel=CHANNEL, external_user_id=str(msg.from_user.id), external_message_id=str(update.update_id),
            identity=identity, text=(text or "").strip(), thread=thread, attachments=attachments,
            display_name=msg.from_user.full_name))
    if not text or not text.strip():
        return Unsupported(target, _kind(msg))
    inbound = InboundMessage(
        channel=CHANNEL,
        external_user_id=str(msg.from_user.id),
        external_message_id=str(update.update_id),
        identity=identity,
        text=text.strip(),
        thread=thread,
        attachments=attachments,
        display_name=msg.from_user.full_name,
    )
    return ChatText(target, inbound)

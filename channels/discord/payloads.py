"""Discord's payloads translated, in this one place, into what the connection works with.

A Gateway ``MESSAGE_CREATE`` is kept when it is addressed to the bot (``addressed``): a direct message,
a mention of the bot, a reply to one of its messages, or a message in a thread the bot opened; a bot's
own messages (ours or another bot's) never are. What is queued in the inbox is the item as Discord sent
it, tagged with where it came from (``queued_message`` / ``queued_interaction``); ``received`` reads it
back as a ``Received`` when the inbox hands it over.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["ASK", "Received", "addressed", "ask_command", "queued_interaction", "queued_message", "received"]

ASK = "ask"
DM_CHANNEL_TYPES = frozenset({1, 3})  # a direct message, a group DM
THREAD_CHANNEL_TYPES = frozenset({10, 11, 12})  # announcement, public and private threads
WRITTEN = frozenset({0, 19})  # a message and a reply; not a system message (a pin, a join, a thread started)


def ask_command() -> dict[str, Any]:
    """The ``/ask`` slash command as registered for the application (one required text option)."""
    return {"name": ASK, "type": 1, "description": "Ask the assistant a question",
            "options": [{"type": 3, "name": "question", "description": "Your question", "required": True}]}


@dataclass(frozen=True)
class Received:
    """One message for the bot: who wrote what, where, and where the answer goes."""

    message_id: str  # Discord's id of the message, or of the interaction
    channel_id: str
    guild_id: str | None
    author_id: str
    author_name: str | None
    text: str
    interaction_token: str | None = None  # an ``/ask``: its answer is the interaction's follow-up

    @property
    def direct(self) -> bool:
        return self.guild_id is None


def _mentions(message: dict, bot_id: str) -> bool:
    return any(str(user.get("id")) == bot_id for user in message.get("mentions") or ())


def _replies_to(message: dict, bot_id: str) -> bool:
    referenced = message.get("referenced_message") or {}
    return str((referenced.get("author") or {}).get("id", "")) == bot_id


def addressed(message: dict, bot_id: str, *, our_thread: bool) -> bool:
    """Whether the bot answers this ``MESSAGE_CREATE``: never a bot's; a DM, a mention, a reply to the bot,
    or anything in a thread the bot opened."""
    author = message.get("author") or {}
    if author.get("bot") or str(author.get("id", "")) == bot_id or message.get("webhook_id"):
        return False
    if message.get("type", 0) not in WRITTEN or not str(message.get("content") or "").strip():
        return False
    return (message.get("guild_id") is None or our_thread or _mentions(message, bot_id)
            or _replies_to(message, bot_id))


def queued_message(message: dict) -> str:
    return json.dumps({"source": "gateway", "message": message}, separators=(",", ":"))


def queued_interaction(interaction: dict) -> str:
    return json.dumps({"source": "interaction", "interaction": interaction}, separators=(",", ":"))


def _without_bots(text: str, mentions: list[dict]) -> str:
    """The text without its mentions of bots (``<@id>``, ``<@!id>``): the bot's own name is not the question."""
    for user in mentions:
        if user.get("bot"):
            text = re.sub(rf"<@!?{re.escape(str(user.get('id')))}>", "", text)
    return text.strip()


def _name(user: dict) -> str | None:
    return user.get("global_name") or user.get("username")


def received(body: str) -> Received:
    item = json.loads(body)
    if item.get("source") == "interaction":
        interaction = item["interaction"]
        user = (interaction.get("member") or {}).get("user") or interaction.get("user") or {}
        options = (interaction.get("data") or {}).get("options") or []
        question = next((str(o.get("value", "")) for o in options if o.get("name") == "question"), "")
        return Received(message_id=str(interaction["id"]), channel_id=str(interaction.get("channel_id") or ""),
                        guild_id=interaction.get("guild_id"), author_id=str(user.get("id", "")),
                        author_name=_name(user), text=question.strip(), interaction_token=interaction["token"])
    message = item["message"]
    author = message.get("author") or {}
    text = str(message.get("content") or "")
    return Received(message_id=str(message["id"]), channel_id=str(message["channel_id"]),
                    guild_id=message.get("guild_id"), author_id=str(author.get("id", "")), author_name=_name(author),
                    text=_without_bots(text, message.get("mentions") or []))

"""A Bot Framework activity as Teams sends it, read into typed models in this one place.

Only ``message`` activities are answered: in a personal chat and a group chat every message, in a
channel only one that @mentions the bot. The bot's own ``<at>Name</at>`` mention is taken out of the
text (Teams puts it there as typed). A press of an Adaptive Card's ``Action.Submit`` comes as a message
with no text and the action's ``data`` as ``value``: its ``choice`` is what the person said. A file
or picture alone is described in words (never its download URL) and answered without the model.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.channel import BadRequest, DeliveryRejected

__all__ = ["Activity", "ChannelAccount", "ConversationAccount", "Mention", "Sent", "parse_activity",
           "queued_activity"]

_SPACES = re.compile(r"[ \t]+")
FILE_INFO = "application/vnd.microsoft.teams.file.download.info"
CARD_TYPES = ("application/vnd.microsoft.card.", "application/vnd.microsoft.teams.card.")


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class ChannelAccount(_Model):
    id: str
    name: str | None = None
    aad_object_id: str | None = Field(None, alias="aadObjectId")


class ConversationAccount(_Model):
    id: str
    conversation_type: str | None = Field(None, alias="conversationType")  # personal | groupChat | channel
    is_group: bool | None = Field(None, alias="isGroup")
    tenant_id: str | None = Field(None, alias="tenantId")


class Mention(_Model):
    type: str
    mentioned: ChannelAccount | None = None
    text: str | None = None  # "<at>Name</at>", as it stands in the activity's text


class Sent(_Model):
    """A file or picture that came with a message (its download URL is not kept)."""

    content_type: str = Field("", alias="contentType")
    name: str | None = None

    @property
    def described(self) -> str | None:
        """The transcript's words for it; None for Teams' own copy of the message body (``text/html``)."""
        if self.content_type == "text/html" or self.content_type.startswith(CARD_TYPES):
            return None
        if self.content_type == FILE_INFO:
            return f'[a file "{self.name}"]' if self.name else "[a file]"
        kind = "an image" if self.content_type.startswith("image/") else "a file"
        known = self.content_type and not self.content_type.endswith("/*")  # Teams' inline pictures: "image/*"
        return f"[{kind} ({self.content_type})]" if known else f"[{kind}]"


class Activity(_Model):
    type: str
    id: str | None = None
    service_url: str = Field(alias="serviceUrl", min_length=1)
    channel_id: str = Field("msteams", alias="channelId")
    sender: ChannelAccount | None = Field(None, alias="from")
    conversation: ConversationAccount | None = None
    recipient: ChannelAccount | None = None
    text: str | None = None
    entities: tuple[Mention, ...] = ()
    value: dict | None = None
    attachments: tuple[Sent, ...] = ()

    @property
    def in_channel(self) -> bool:
        return self.conversation is not None and self.conversation.conversation_type == "channel"

    @property
    def mentions_bot(self) -> bool:
        bot = self.recipient.id if self.recipient is not None else None
        return any(e.type == "mention" and e.mentioned is not None and e.mentioned.id == bot for e in self.entities)

    @property
    def answerable(self) -> bool:
        """A message from a person, in a chat, or in a channel with the bot mentioned."""
        if self.type != "message" or not self.id or self.sender is None or self.conversation is None:
            return False
        return self.mentions_bot or not self.in_channel

    def said(self) -> str:
        """What the person said: the text without the bot's mention, or the pressed card button's choice."""
        text = self.text or ""
        bot = self.recipient.id if self.recipient is not None else None
        for entity in self.entities:
            if entity.type == "mention" and entity.text and entity.mentioned is not None and entity.mentioned.id == bot:
                text = text.replace(entity.text, " ")
        text = "\n".join(_SPACES.sub(" ", line).strip() for line in text.splitlines()).strip()
        if not text and self.value is not None and isinstance(self.value.get("choice"), str):
            return self.value["choice"].strip()
        return text


    def media(self) -> list[str]:
        """What came besides the text, in words (files, pictures); nothing for a plain message."""
        return [d for a in self.attachments if (d := a.described) is not None]


def parse_activity(body: bytes) -> Activity:
    """The activity a webhook received; a 400 when it is not one."""
    try:
        return Activity.model_validate_json(body)
    except ValidationError as exc:
        raise BadRequest(f"not a Bot Framework activity ({exc.error_count()} validation error(s))") from exc


def queued_activity(body: str | bytes) -> Activity:
    """The activity as it was queued (checked at the webhook already)."""
    try:
        return Activity.model_validate_json(body)
    except ValidationError as exc:
        raise DeliveryRejected("not a queued Teams activity") from exc

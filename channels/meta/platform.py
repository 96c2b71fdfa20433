"""What differs between WhatsApp Cloud, Messenger and Instagram, behind one small base class.

Each kind's module (``whatsapp``, ``messenger``, ``instagram``) fills a ``Platform``: which credential
is the token and which the account id, how a delivery splits into items, how a queued item reads
(``Received``), how a text reply, a typing indicator and the account check are asked of the Graph API.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import ValidationError

from channels.meta.payloads import MessagingEvent, MessagingPayload
from channels.meta.webhook import Incoming, StatusUpdate
from gateway.channel import Attachment, BadRequest, Capabilities, Connection, Delivery, DeliveryRejected

__all__ = ["MessagingPlatform", "Platform", "Received"]


@dataclass(frozen=True)
class Received:
    """One queued message, read: who sent it, what they typed, what media came with it (described)."""

    message_id: str
    sender: str
    text: str  # typed text (or a caption, a button's title); "" when only media came
    name: str | None = None
    media: tuple[Attachment, ...] = ()

    def described(self) -> str:
        """The transcript's text for a message with media: each piece said in words, then any text."""
        said = [a.description or f"[{a.kind}]" for a in self.media]
        return "\n".join([*said, *([self.text] if self.text else [])]) or "[an empty message]"


class Platform:
    kind: str
    channel: str  # the inbox channel name (= the kind)
    capabilities: Capabilities
    token_field: str  # the credential that authorizes Graph calls
    id_field: str  # the credential naming the account (checked on save)
    identity_prefix: str

    def identity(self, sender: str) -> str:
        """The customer's persona identity (before the connection scopes it)."""
        return f"{self.identity_prefix}:{sender}"

    def split(self, body: bytes, account: str) -> list[Incoming | StatusUpdate]:
        """The delivery's items that concern ``account`` (this connection's page, number or Instagram user):
        an app posts every account's deliveries to the URL set for it, and another account's are not ours."""
        raise NotImplementedError

    def received(self, delivery: Delivery) -> Received:
        raise NotImplementedError

    def send_path(self, connection: Connection) -> str:
        raise NotImplementedError

    def text_message(self, to: str, text: str) -> dict:
        raise NotImplementedError

    def typing_message(self, received: Received) -> dict:
        raise NotImplementedError

    def sent_id(self, answer: dict) -> str:
        raise NotImplementedError

    def account_fields(self) -> str:
        raise NotImplementedError

    def account_name(self, answer: dict) -> str | None:
        raise NotImplementedError


def _described_attachment(kind: str, title: str | None) -> Attachment:
    words = {"image": "a photo", "video": "a video", "audio": "a voice message or audio", "file": "a file",
             "sticker": "a sticker", "location": "a location", "share": "a shared post",
             "story_mention": "a story mention", "ig_reel": "a reel", "reel": "a reel"}.get(kind, f"a {kind}")
    return Attachment(kind=kind, description=f"[{words}{': ' + title if title else ''}]")


class MessagingPlatform(Platform):
    """Messenger and Instagram: ``entry[].messaging[]`` events, ``/me/messages`` with ``recipient.id``."""

    objects: frozenset[str]

    def split(self, body: bytes, account: str) -> list[Incoming | StatusUpdate]:
        try:
            payload = MessagingPayload.model_validate_json(body)
        except ValidationError as exc:
            raise BadRequest(f"not a {self.kind} webhook delivery ({exc.error_count()} validation error(s))") from exc
        if payload.object not in self.objects:
            raise BadRequest(f"not a {self.kind} delivery (object {payload.object!r})")
        items: list[Incoming | StatusUpdate] = []
        for entry in payload.entry:
            if entry.id == account:
                for event in entry.messaging:
                    items.extend(self._items(event))
        return items

    def _items(self, event: MessagingEvent) -> list[Incoming | StatusUpdate]:
        queued = json.dumps({"event": event.model_dump(mode="json", exclude_none=True)})
        if event.message is not None:
            if event.message.is_echo:  # our own reply, echoed back to the page
                return []
            return [Incoming(event.message.mid, event.sender.id, queued)]
        if event.postback is not None:  # a button the user pressed: its title is what they said
            mid = event.postback.mid or f"postback-{event.sender.id}-{event.timestamp}"
            return [Incoming(mid, event.sender.id, queued)]
        if event.delivery is not None:
            return [StatusUpdate(mid, "delivered") for mid in event.delivery.mids]
        if event.read is not None and event.read.mid:
            return [StatusUpdate(event.read.mid, "read")]
        return []  # reads by watermark, reactions, referrals: nothing to answer or record

    def received(self, delivery: Delivery) -> Received:
        try:
            event = MessagingEvent.model_validate(json.loads(delivery.body)["event"])
        except (ValidationError, ValueError, KeyError, TypeError) as exc:
            raise DeliveryRejected(f"not a queued {self.kind} event") from exc
        if event.postback is not None:
            mid = event.postback.mid or f"postback-{event.sender.id}-{event.timestamp}"
            return Received(mid, event.sender.id, (event.postback.title or event.postback.payload or "").strip())
        assert event.message is not None
        message = event.message
        media = tuple(_described_attachment(a.type, a.title) for a in message.attachments)
        if message.sticker_id is not None and not media:
            media = (_described_attachment("sticker", None),)
        return Received(message.mid, event.sender.id, (message.text or "").strip(), media=media)

    def send_path(self, connection: Connection) -> str:
        return "me/messages"

    def text_message(self, to: str, text: str) -> dict:
        return {"recipient": {"id": to}, "messaging_type": "RESPONSE", "message": {"text": text}}

    def typing_message(self, received: Received) -> dict:
        return {"recipient": {"id": received.sender}, "sender_action": "typing_on"}

    def sent_id(self, answer: dict) -> str:
        return str(answer.get("message_id", ""))

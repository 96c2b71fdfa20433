"""WhatsApp Business on Meta's own Cloud API (kind ``whatsapp_cloud``): no Twilio in between.

Meta posts ``whatsapp_business_account`` deliveries to ``/channels/meta/{id}/whatsapp``; each message
in them is queued on its own, each status (``sent``, ``delivered``, ``read``, ``failed``) applied to
the reply it names. Replies go to ``POST /{phone_number_id}/messages``, split at 4,096 characters;
while the model thinks, the customer's message is marked read with the typing indicator on. Outside
the 24-hour customer-service window Meta refuses a free-form reply (131047, at once or later in a
``failed`` status): the refusal is the reply's delivery error, in the trace and the console, until an
operator re-opens the conversation with an approved template (``channels.meta.templates``).
"""

from __future__ import annotations

import json

from pydantic import ValidationError

from channels.connection_capabilities import WHATSAPP_CLOUD
from channels.meta.connection import MetaConnections
from channels.meta.payloads import WaMessage, WaPayload, WaValue
from channels.meta.platform import Platform, Received
from channels.meta.webhook import Incoming, StatusUpdate
from gateway.channel import Attachment, BadRequest, ChannelContext, Connection, Delivery, DeliveryRejected

__all__ = ["OUTSIDE_WINDOW", "WhatsAppCloud", "build_connections"]

OUTSIDE_WINDOW = 131047  # Graph: "Re-engagement message", more than 24 hours since the customer last wrote


def _media(message: WaMessage) -> tuple[Attachment, ...]:
    kind = message.type
    if kind in ("image", "audio", "video", "document", "sticker"):
        media = getattr(message, kind)
        if media is None:
            return (Attachment(kind=kind, description=f"[{kind}]"),)
        words = {"image": "a photo", "audio": "a voice message" if media.voice else "an audio file",
                 "video": "a video", "document": "a document", "sticker": "a sticker"}[kind]
        name = f' "{media.filename}"' if media.filename else ""
        mime = f" ({media.mime_type})" if media.mime_type else ""
        return (Attachment(kind=kind, file_id=media.id, mime_type=media.mime_type, filename=media.filename,
                           description=f"[{words}{name}{mime}]"),)
    if kind == "location" and message.location is not None:
        place = message.location
        where = ", ".join(p for p in (place.name, place.address) if p)
        at = f"{place.latitude}, {place.longitude}" if place.latitude is not None else "unknown position"
        return (Attachment(kind="location", description=f"[a location: {at}{' — ' + where if where else ''}]"),)
    if kind == "contacts":  # a shared contact card: its name only (the numbers are a third party's)
        names = ", ".join(c.name.formatted_name or "unnamed" for c in message.contacts) or "unnamed"
        return (Attachment(kind="contact", description=f"[a contact card: {names}]"),)
    if kind in ("text", "button", "interactive"):
        return ()
    return (Attachment(kind=kind, description=f"[a {kind} message]"),)


def _text(message: WaMessage) -> str:
    if message.text is not None:
        return message.text.body.strip()
    if message.button is not None:
        return message.button.text.strip()
    if message.interactive is not None:
        reply = message.interactive.button_reply or message.interactive.list_reply
        return reply.title.strip() if reply else ""
    media = message.image or message.video or message.document
    return (media.caption or "").strip() if media is not None else ""


class WhatsAppCloud(Platform):
    kind = channel = "whatsapp_cloud"
    capabilities = WHATSAPP_CLOUD
    token_field, id_field, identity_prefix = "access_token", "phone_number_id", "whatsapp"

    def identity(self, sender: str) -> str:
        return f"whatsapp:+{sender}"  # a WhatsApp id is the number without its +: the same customer as on Twilio

    def split(self, body: bytes, account: str) -> list[Incoming | StatusUpdate]:
        try:
            payload = WaPayload.model_validate_json(body)
        except ValidationError as exc:
            raise BadRequest(f"not a WhatsApp webhook delivery ({exc.error_count()} validation error(s))") from exc
        if payload.object != "whatsapp_business_account":
            raise BadRequest(f"not a WhatsApp delivery (object {payload.object!r})")
        items: list[Incoming | StatusUpdate] = []
        for entry in payload.entry:
            for change in entry.changes:
                if change.field == "messages" and change.value.metadata.phone_number_id == account:
                    items.extend(self._items(change.value))
        return items

    def _items(self, value: WaValue) -> list[Incoming | StatusUpdate]:
        items: list[Incoming | StatusUpdate] = []
        for message in value.messages:
            if message.type in ("reaction", "system"):  # an emoji on a message, a number change: nothing to answer
                continue
            queued = {"message": message.model_dump(mode="json", by_alias=True, exclude_none=True),
                      "name": value.name_of(message.from_)}
            items.append(Incoming(message.id, message.from_, json.dumps(queued)))
        for status in value.statuses:
            error = status.errors[0] if status.errors else None
            items.append(StatusUpdate(status.id, status.status, error.describe() if error else None,
                                      error.code if error else None))
        return items

    def received(self, delivery: Delivery) -> Received:
        try:
            queued = json.loads(delivery.body)
            message = WaMessage.model_validate(queued["message"])
        except (ValidationError, ValueError, KeyError, TypeError) as exc:
            raise DeliveryRejected("not a queued WhatsApp message") from exc
        return Received(message.id, message.from_, _text(message), queued.get("name"), _media(message))

    def send_path(self, connection: Connection) -> str:
        return f"{connection.secret('phone_number_id')}/messages"

    def text_message(self, to: str, text: str) -> dict:
        return {"messaging_product": "whatsapp", "recipient_type": "individual", "to": to, "type": "text",
                "text": {"body": text, "preview_url": False}}

    def typing_message(self, received: Received) -> dict:
        return {"messaging_product": "whatsapp", "status": "read", "message_id": received.message_id,
                "typing_indicator": {"type": "text"}}

    def sent_id(self, answer: dict) -> str:
        messages = answer.get("messages") or [{}]
        return str(messages[0].get("id", ""))

    def account_fields(self) -> str:
        return "display_phone_number,verified_name"

    def account_name(self, answer: dict) -> str | None:
        name, number = answer.get("verified_name"), answer.get("display_phone_number")
        return f"{name} ({number})" if name and number else name or number


def build_connections(context: ChannelContext) -> MetaConnections:
    return MetaConnections(context, WhatsAppCloud())

"""What Meta posts to a webhook, typed: WhatsApp Cloud API changes, Messenger and Instagram messaging events.

Shapes from Meta's webhook references (WhatsApp ``messages`` field; Messenger Platform ``messages``,
``messaging_postbacks``, ``message_deliveries``, ``message_reads``; Instagram messaging). Unknown
fields are ignored; a field Meta adds later changes nothing here.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MessagingEvent", "MessagingPayload", "WaError", "WaMessage", "WaPayload", "WaStatus", "WaValue"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


# -- WhatsApp Cloud API -------------------------------------------------------------------------
class WaText(_Model):
    body: str = ""


class WaMedia(_Model):
    id: str | None = None
    mime_type: str | None = None
    caption: str | None = None
    filename: str | None = None
    voice: bool | None = None
    animated: bool | None = None


class WaLocation(_Model):
    latitude: float | None = None
    longitude: float | None = None
    name: str | None = None
    address: str | None = None


class WaContactName(_Model):
    formatted_name: str | None = None


class WaContactCard(_Model):
    name: WaContactName = Field(default_factory=WaContactName)


class WaButton(_Model):
    text: str = ""


class WaReply(_Model):
    title: str = ""


class WaInteractive(_Model):
    type: str = ""
    button_reply: WaReply | None = None
    list_reply: WaReply | None = None


class WaMessage(_Model):
    from_: str = Field(alias="from")
    id: str
    timestamp: str | None = None
    type: str = "text"
    text: WaText | None = None
    image: WaMedia | None = None
    audio: WaMedia | None = None
    video: WaMedia | None = None
    document: WaMedia | None = None
    sticker: WaMedia | None = None
    location: WaLocation | None = None
    contacts: list[WaContactCard] = Field(default_factory=list)
    button: WaButton | None = None
    interactive: WaInteractive | None = None


class WaErrorData(_Model):
    details: str | None = None


class WaError(_Model):
    code: int | None = None
    title: str | None = None
    message: str | None = None
    error_data: WaErrorData | None = None

    def describe(self) -> str:
        text = self.message or self.title or "no message"
        if self.error_data is not None and self.error_data.details:
            text += f": {self.error_data.details}"
        return f"({self.code}) {text}" if self.code is not None else text


class WaStatus(_Model):
    id: str
    status: str
    recipient_id: str | None = None
    errors: list[WaError] = Field(default_factory=list)


class WaProfile(_Model):
    name: str | None = None


class WaContact(_Model):
    wa_id: str | None = None
    profile: WaProfile = Field(default_factory=WaProfile)


class WaMetadata(_Model):
    phone_number_id: str | None = None
    display_phone_number: str | None = None


class WaValue(_Model):
    messaging_product: str | None = None
    metadata: WaMetadata = Field(default_factory=WaMetadata)
    contacts: list[WaContact] = Field(default_factory=list)
    messages: list[WaMessage] = Field(default_factory=list)
    statuses: list[WaStatus] = Field(default_factory=list)

    def name_of(self, wa_id: str) -> str | None:
        return next((c.profile.name for c in self.contacts if c.wa_id == wa_id), None)


class WaChange(_Model):
    field: str = ""
    value: WaValue = Field(default_factory=WaValue)


class WaEntry(_Model):
    id: str | None = None
    changes: list[WaChange] = Field(default_factory=list)


class WaPayload(_Model):
    object: str
    entry: list[WaEntry] = Field(default_factory=list)


# -- Messenger and Instagram --------------------------------------------------------------------
class Party(_Model):
    id: str


class Attachment(_Model):
    type: str = "file"
    title: str | None = None


class MessengerMessage(_Model):
    mid: str
    text: str | None = None
    attachments: list[Attachment] = Field(default_factory=list)
    is_echo: bool = False
    sticker_id: int | None = None


class Postback(_Model):
    mid: str | None = None
    title: str | None = None
    payload: str | None = None


class Receipt(_Model):
    mids: list[str] = Field(default_factory=list)  # Messenger deliveries
    mid: str | None = None  # Instagram reads
    watermark: int | None = None


class MessagingEvent(_Model):
    sender: Party
    recipient: Party
    timestamp: int | None = None
    message: MessengerMessage | None = None
    postback: Postback | None = None
    delivery: Receipt | None = None
    read: Receipt | None = None


class MessagingEntry(_Model):
    id: str | None = None
    time: int | None = None
    messaging: list[MessagingEvent] = Field(default_factory=list)


class MessagingPayload(_Model):
    object: str
    entry: list[MessagingEntry] = Field(default_factory=list)

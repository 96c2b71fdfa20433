"""One mail read at the vendor boundary into ``Mail``: who wrote, in which thread, the new part only.

The text the model sees is what the customer wrote this time: the plain-text part (or the HTML part
reduced to text by the knowledge base's HTML extraction), with quoted history and signatures cut off
by ``mail-parser-reply``. Attachments are recorded by name, type and size, never read. ``Mail`` is
what the inbox queues (JSON), so a consumer on another replica needs neither the mailbox nor the raw
mail.
"""

from __future__ import annotations

import email
import email.policy
import re
from email.message import EmailMessage
from email.utils import getaddresses, parseaddr

from mailparser_reply import EmailReplyParser
from pydantic import BaseModel, ConfigDict

from channels.render import html_to_text
from rag_core.extract.html import html_as_text

__all__ = ["Mail", "MailAttachment", "headers_of", "message_ids", "read_mail", "thread_root"]

_IDS = re.compile(r"<[^<>\s]+>")
_REPLIES = EmailReplyParser(languages=["en", "de", "fr", "es", "it", "nl", "pl", "sv"])


class MailAttachment(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    type: str
    size: int

    def described(self) -> str:
        return f'[an attachment "{self.name}" ({self.type}, {self.size} bytes): not read]'


class Mail(BaseModel):
    """A mail as queued: ids and addresses for the reply, the new text for the model."""

    model_config = ConfigDict(frozen=True)

    message_id: str  # with its angle brackets, as in the header
    sender: str  # the address a reply goes to (Reply-To, else From), lower-cased
    name: str | None = None
    subject: str = ""
    in_reply_to: str | None = None
    references: tuple[str, ...] = ()
    thread: str  # the thread's root Message-ID: one conversation per thread
    text: str = ""  # the new part only
    attachments: tuple[MailAttachment, ...] = ()
    note: str | None = None  # why the body was not read (over the size cap)

    def described(self) -> str:
        """The transcript's text: the subject of a new thread, the new part, each attachment in words."""
        said = [self.note] if self.note else []
        said += [a.described() for a in self.attachments]
        return "\n".join(part for part in (self.text, *said) if part)

    def prompt_text(self) -> str:
        """What the turn reads: the subject when it opens the thread (it often says what it is about)."""
        body = self.described()
        if self.in_reply_to is None and self.subject.strip():
            return f"Subject: {self.subject.strip()}\n\n{body}".strip()
        return body


def parse_bytes(raw: bytes) -> EmailMessage:
    return email.message_from_bytes(raw, policy=email.policy.default)  # type: ignore[return-value]


def message_ids(value: str | None) -> tuple[str, ...]:
    return tuple(_IDS.findall(value or ""))


def headers_of(message: EmailMessage) -> dict[str, str]:
    return {k.lower(): str(v) for k, v in message.items()}


def thread_root(in_reply_to: str | None, references: tuple[str, ...], message_id: str) -> str:
    """The first id of References (the thread's first mail), else the mail replied to, else the mail itself."""
    if references:
        return references[0]
    return in_reply_to or message_id


def _new_part(text: str) -> str:
    text = text.replace("\r\n", "\n").strip()
    if not text:
        return ""
    try:
        replies = _REPLIES.read(text).replies
    except Exception:  # a parser's regex meeting an odd mail: the whole text beats nothing
        return text
    latest = replies[0].body.strip() if replies else ""
    return latest or text


def _html_text(html: str) -> str:
    return html_as_text(html) or html_to_text(html).strip()


def _content(part: EmailMessage) -> str:
    try:
        return str(part.get_content())
    except (LookupError, UnicodeError, ValueError):  # an unknown or wrong charset: read what decodes
        payload = part.get_payload(decode=True)
        return payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else ""


def _body(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain",))
    if part is not None:
        return _content(part)  # type: ignore[arg-type]
    part = message.get_body(preferencelist=("html",))
    if part is not None:
        return _html_text(_content(part))  # type: ignore[arg-type]
    return ""


def _attachments(message: EmailMessage) -> tuple[MailAttachment, ...]:
    found = []
    for part in message.iter_attachments():
        payload = part.get_payload(decode=True) or b""
        found.append(MailAttachment(name=part.get_filename() or "unnamed", type=part.get_content_type(),
                                    size=len(payload) if isinstance(payload, bytes) else 0))
    return tuple(found)


def read_mail(message: EmailMessage, *, note: str | None = None, root: str | None = None,
              fallback_id: str = "") -> Mail:
    """``message`` as queued. ``note``: its body was not fetched (only its headers are here); ``root``: the
    thread's root when the mail answers one of ours (known from what we sent), else from its headers;
    ``fallback_id``: its id when it has no Message-ID (a stable one: the mailbox's UID)."""
    message_id = (message_ids(message.get("Message-ID")) or (fallback_id,))[0]
    in_reply_to = (message_ids(message.get("In-Reply-To")) or (None,))[0]
    references = message_ids(message.get("References"))
    reply_to = getaddresses([str(message.get("Reply-To", ""))])
    name, address = parseaddr(str(message.get("From", "")))
    if reply_to and reply_to[0][1]:
        address = reply_to[0][1]
    text = attachments = None
    if note is None:
        text, attachments = _new_part(_body(message)), _attachments(message)
    return Mail(message_id=message_id, sender=address.strip().lower(), name=name.strip() or None,
                subject=str(message.get("Subject", "")).strip(), in_reply_to=in_reply_to, references=references,
                thread=root or thread_root(in_reply_to, references, message_id), text=text or "",
                attachments=attachments or (), note=note)

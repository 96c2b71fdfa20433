"""Mail the bot never answers: machines writing, lists, bounces, and ourselves.

An answer to any of these would go to a machine or a crowd, or start a loop between two robots: an
auto-reply (``Auto-Submitted`` other than ``no``, RFC 3834, and the common vacation headers), bulk or
list mail (``Precedence: bulk|list|junk``, ``List-Id``), a bounce (``Return-Path: <>``, a
``multipart/report``, a mailer daemon), a mail from our own address, and a mail whose Message-ID is
one we sent (our reply come back). Each is recorded by its reason (logged and counted), never dropped
unsaid.
"""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import parseaddr

__all__ = ["REASONS", "never_answered"]

REASONS = ("auto_reply", "bulk", "mailing_list", "bounce", "own_address", "own_mail")
_DAEMONS = ("mailer-daemon", "postmaster", "mail-daemon", "noreply-dsn")


def never_answered(message: EmailMessage, *, own_address: str, ours: bool) -> str | None:
    """The reason ``message`` is not answered (one of ``REASONS``), or None. ``ours``: its Message-ID is one
    this connection sent."""
    if ours:
        return "own_mail"
    _, sender = parseaddr(str(message.get("From", "")))
    sender = sender.strip().lower()
    if sender and sender == own_address.strip().lower():
        return "own_address"
    return_path = message.get("Return-Path")
    if (return_path is not None and str(return_path).strip() in ("<>", "")) or message.get_content_type() == \
            "multipart/report" or sender.split("@")[0] in _DAEMONS:
        return "bounce"
    auto = str(message.get("Auto-Submitted", "no")).strip().lower()
    if auto.split(";")[0].strip() != "no" or message.get("X-Autoreply") or message.get("X-Autorespond"):
        return "auto_reply"
    if message.get("List-Id") or message.get("List-Unsubscribe"):
        return "mailing_list"
    if str(message.get("Precedence", "")).strip().lower() in ("bulk", "list", "junk"):
        return "bulk"
    return None

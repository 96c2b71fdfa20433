"""Replies by SMTP (``aiosmtplib``), in the customer's thread, and the SMTP half of the check on save.

A reply carries ``In-Reply-To`` (the customer's Message-ID), ``References`` (theirs plus that id) and
a ``Re:`` subject, so every mail client files it in the thread; ``Auto-Submitted: auto-replied``
(RFC 3834) tells other robots not to answer it. Failures are translated here: a 4xx, a refused or
dropped connection is worth another try; a 5xx is final. A relay of the operator's own network (plain
SMTP to a loopback or private address) that offers no AUTH is used without a login.
"""

from __future__ import annotations

import ipaddress
from email.message import EmailMessage
from email.utils import formataddr, formatdate, make_msgid

import aiosmtplib

from channels.email.certificate import untrusted_certificate
from channels.email.message import Mail
from channels.errors import ChannelRejected, ChannelUnavailable
from gateway.channel import Connection

__all__ = ["SmtpRefused", "check_smtp", "reply_to", "send"]

TIMEOUT_S = 30.0


class SmtpRefused(Exception):
    """The server refused the login or the greeting: its reason, for the operator."""


def _tls(connection: Connection) -> dict:
    tls = connection.secret("tls") or "ssl"
    return {"use_tls": tls == "ssl", "start_tls": tls == "starttls"}


def _client(connection: Connection) -> aiosmtplib.SMTP:
    return aiosmtplib.SMTP(hostname=connection.secret("smtp_host"), port=int(connection.secret("smtp_port")),
                           timeout=TIMEOUT_S, **_tls(connection))


def _own_relay(client: aiosmtplib.SMTP, connection: Connection) -> bool:
    """Plain SMTP (``tls`` "none") to a loopback or private address: a relay of the operator's own network."""
    if connection.secret("tls") != "none":
        return False
    peer = client.get_transport_info("peername")
    try:
        address = ipaddress.ip_address(peer[0])
    except (TypeError, ValueError, IndexError):
        return False
    return address.is_private  # loopback, 10/8, 172.16/12, 192.168/16, fc00::/7 ...


async def _log_in(client: aiosmtplib.SMTP, connection: Connection) -> None:
    """Log in, unless the server offers no AUTH and is a relay of the operator's own network: such a relay
    (Postfix for ``mynetworks``) takes mail from the addresses it trusts without a login."""
    if client.is_ehlo_or_helo_needed:
        try:
            await client.ehlo()
        except aiosmtplib.SMTPHeloError:
            await client.helo()  # an old server that knows only HELO: no extensions, so no AUTH
    if not client.supports_extension("auth") and _own_relay(client, connection):
        return
    await client.login(connection.secret("username"), connection.secret("password"))


def _subject(subject: str) -> str:
    subject = subject.strip()
    return subject if subject.lower().startswith("re:") else f"Re: {subject}".strip()


def reply_to(mail: Mail, text: str, connection: Connection, display_name: str | None = None) -> EmailMessage:
    """The reply to ``mail``: in its thread, from the connection's address, with a Message-ID of ours."""
    address = connection.secret("address")
    reply = EmailMessage()
    reply["From"] = formataddr((display_name, address)) if display_name else address
    reply["To"] = formataddr((mail.name, mail.sender)) if mail.name else mail.sender
    reply["Subject"] = _subject(mail.subject) if mail.subject else "Re: your message"
    reply["Date"] = formatdate(localtime=False)
    reply["Message-ID"] = make_msgid(domain=address.rpartition("@")[2] or None)
    if mail.message_id:
        reply["In-Reply-To"] = mail.message_id
        reply["References"] = " ".join([*mail.references, mail.message_id][-20:])  # the newest ids, as clients do
    reply["Auto-Submitted"] = "auto-replied"
    reply.set_content(text)
    return reply


async def send(message: EmailMessage, connection: Connection) -> None:
    try:
        async with _client(connection) as client:
            await _log_in(client, connection)
            await client.send_message(message)
    except aiosmtplib.SMTPRecipientsRefused as exc:
        raise ChannelRejected(f"SMTP refused the recipient: {exc.recipients[0].message if exc.recipients else ''}"
                              ) from None
    except aiosmtplib.SMTPResponseException as exc:
        said = f"SMTP {exc.code} {exc.message}".strip()
        if 400 <= exc.code < 500:
            raise ChannelUnavailable(said) from None
        raise ChannelRejected(said) from None
    except (aiosmtplib.SMTPException, OSError) as exc:  # refused, dropped, timed out
        raise ChannelUnavailable(f"SMTP server unreachable: {type(exc).__name__}: {exc}") from None


async def check_smtp(connection: Connection) -> None:
    """EHLO and login; a refusal (5xx) or a server certificate not trusted raises ``SmtpRefused`` with the
    reason, a temporary failure (4xx) or a network error ``OSError``."""
    try:
        async with _client(connection) as client:
            await _log_in(client, connection)
    except aiosmtplib.SMTPResponseException as exc:
        said = f"SMTP {exc.code} {exc.message}".strip()
        if 400 <= exc.code < 500:  # a temporary failure: asked again later, the connection kept
            raise OSError(said) from None
        raise SmtpRefused(said) from None
    except aiosmtplib.SMTPNotSupported as exc:
        raise SmtpRefused(f"SMTP: {exc}") from None
    except (aiosmtplib.SMTPException, OSError) as exc:
        if (untrusted := untrusted_certificate(exc, "SMTP", connection.secret("smtp_host"))) is not None:
            raise SmtpRefused(untrusted) from None
        if isinstance(exc, OSError):
            raise
        raise OSError(f"{type(exc).__name__}: {exc}") from None

"""The email kind's tests: its real peers, Dovecot (IMAP) and aiosmtpd (SMTP), started once per session on
first use; a connection's credentials for them; a customer's mail."""

from __future__ import annotations

from collections.abc import Iterator
from email.message import EmailMessage
from email.utils import make_msgid

import pytest

from tests.fakes.mail_server import PASSWORD, USER, Dovecot, SmtpReceiver

CUSTOMER = "ada@example.org"


@pytest.fixture(scope="session")
def dovecot() -> Iterator[Dovecot]:
    server = Dovecot().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def smtp() -> Iterator[SmtpReceiver]:
    receiver = SmtpReceiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture
def mailbox(dovecot, smtp) -> Dovecot:
    """The mailbox, empty, and the SMTP server with nothing received."""
    dovecot.clear()
    smtp.clear()
    return dovecot


def credentials(dovecot: Dovecot, smtp: SmtpReceiver, **changed: str) -> dict[str, str]:
    return {"imap_host": "127.0.0.1", "imap_port": str(dovecot.port), "smtp_host": "127.0.0.1",
            "smtp_port": str(smtp.port), "username": USER, "password": PASSWORD, "address": USER, "tls": "none",
            **changed}


def mail(text: str, *, subject: str = "Blue bike?", sender: str = CUSTOMER, reply_to: EmailMessage | None = None,
         **headers: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = f"Ada Lovelace <{sender}>"
    message["To"] = USER
    message["Subject"] = subject
    message["Message-ID"] = make_msgid(domain="example.org")
    if reply_to is not None:
        message["In-Reply-To"] = reply_to["Message-ID"]
        message["References"] = " ".join(filter(None, [str(reply_to.get("References", "")),
                                                        str(reply_to["Message-ID"])]))
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    message.set_content(text)
    return message

"""The email kind's tests: a connection's credentials for the mail peers (``dovecot``, ``smtp`` in conftest),
and a customer's mail."""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import make_msgid

from tests.fakes.mail_server import PASSWORD, USER, Dovecot, SmtpReceiver

CUSTOMER = "ada@example.org"


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

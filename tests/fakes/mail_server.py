"""Real mail peers for the email kind: a throwaway Dovecot IMAP server and an aiosmtpd SMTP receiver.

``Dovecot`` runs Debian's ``dovecot`` in the foreground (``-F``) with a config in a tmp dir: one user
from a passwd-file, maildir in the tmp dir, no TLS, loopback only, on a free port. Test mail is put in
the mailbox by IMAP ``APPEND`` (Python's ``imaplib``, the plain standard client). ``SmtpReceiver`` is an
aiosmtpd ``Controller`` on a free port that takes any login and records each message it is given.
"""

from __future__ import annotations

import datetime
import email
import email.policy
import getpass
import imaplib
import ipaddress
import logging
import os
import pwd
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from email.message import EmailMessage
from pathlib import Path

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.fakes.live_server import free_port

USER, PASSWORD = "support@shop.test", "mailbox-password-0001"


class TestCertificate:
    """A self-signed certificate for 127.0.0.1 and localhost, in ``root``: trust it with ``SSL_CERT_FILE``."""

    def __init__(self, root: Path) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                .not_valid_after(now + datetime.timedelta(days=2))
                .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                            x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                               critical=False)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .sign(key, hashes.SHA256()))
        root.mkdir(parents=True, exist_ok=True)
        root.chmod(0o755)  # Dovecot's unprivileged processes read them
        self.cert, self.key = root / "cert.pem", root / "key.pem"
        self.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        return context


class Dovecot:
    def __init__(self, *, idle: bool = True, tls: TestCertificate | None = None) -> None:
        self.idle = idle  # False: a server that does not offer IMAP IDLE (the listener polls)
        self.tls = tls  # STARTTLS on ``port``, implicit TLS on ``tls_port``, with this certificate
        self.tls_port = free_port()
        # its own dir, readable by Dovecot's unprivileged users when we are root (pytest's tmp dirs are not)
        self.root = Path(tempfile.mkdtemp(prefix="switchboard-dovecot-"))
        self.root.chmod(0o755)
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    def _config(self) -> Path:
        me = getpass.getuser()
        # as root (CI) the login processes must run as Debian's unprivileged users; else as ourselves
        login, internal = ("dovenull", "dovecot") if os.getuid() == 0 else (me, me)
        (self.root / "run").mkdir(parents=True, exist_ok=True)
        (self.root / "mail").mkdir(exist_ok=True)
        users = self.root / "users"
        uid, gid = os.getuid(), os.getgid()
        if uid == 0:  # Dovecot refuses to be a mail user as root
            owner = pwd.getpwnam("dovecot")
            uid, gid = owner.pw_uid, owner.pw_gid
            os.chown(self.root / "mail", uid, gid)
        users.write_text(f"{USER}:{{PLAIN}}{PASSWORD}:{uid}:{gid}::{self.root / 'mail'}\n")
        conf = self.root / "dovecot.conf"
        conf.write_text(f"""
protocols = imap
listen = 127.0.0.1
base_dir = {self.root / 'run'}
state_dir = {self.root / 'run'}
instance_name = switchboard-test-{self.port}
log_path = {self.root / 'dovecot.log'}
{f"ssl = yes{chr(10)}ssl_cert = <{self.tls.cert}{chr(10)}ssl_key = <{self.tls.key}" if self.tls else "ssl = no"}
disable_plaintext_auth = no
auth_mechanisms = plain login
default_login_user = {login}
default_internal_user = {internal}
first_valid_uid = {uid}
{'' if self.idle else 'imap_capability = IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE LITERAL+'}
mail_location = maildir:{self.root / 'mail'}/Maildir
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {users}
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {users}
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {self.tls_port if self.tls else 0}
  }}
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
""")
        return conf

    def start(self) -> Dovecot:
        binary = shutil.which("dovecot") or "/usr/sbin/dovecot"
        self.process = subprocess.Popen([binary, "-F", "-c", str(self._config())], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while True:
            try:
                with imaplib.IMAP4("127.0.0.1", self.port, timeout=2) as imap:
                    imap.login(USER, PASSWORD)
                return self
            except (OSError, imaplib.IMAP4.error):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = (self.root / "dovecot.log").read_text() if (self.root / "dovecot.log").exists() else ""
                    raise RuntimeError(f"dovecot did not start: {log[-2000:]}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        shutil.rmtree(self.root, ignore_errors=True)

    def deliver(self, message: EmailMessage | bytes) -> int:
        """Put a mail in the INBOX as an MTA would (unseen), by IMAP APPEND; answers its UID."""
        raw = message if isinstance(message, bytes) else message.as_bytes(policy=email.policy.SMTP)
        with imaplib.IMAP4("127.0.0.1", self.port, timeout=5) as imap:
            imap.login(USER, PASSWORD)
            status, said = imap.append("INBOX", "", imaplib.Time2Internaldate(time.time()), raw)
            assert status == "OK", status
            return int(said[0].decode().split("APPENDUID ", 1)[1].split()[1].rstrip("]"))  # [APPENDUID <v> <uid>]

    def clear(self) -> None:
        """An empty INBOX (between tests sharing the server)."""
        with imaplib.IMAP4("127.0.0.1", self.port, timeout=5) as imap:
            imap.login(USER, PASSWORD)
            _, count = imap.select("INBOX")
            if int(count[0] or 0):
                imap.store("1:*", "+FLAGS", "(\\Deleted)")
                imap.expunge()

    def flags(self) -> list[str]:
        with imaplib.IMAP4("127.0.0.1", self.port, timeout=5) as imap:
            imap.login(USER, PASSWORD)
            imap.select("INBOX")
            _, data = imap.fetch("1:*", "(FLAGS)")
            return [d.decode() for d in data if d]


class _Recorder:
    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self.lock = threading.Lock()
        self.failures: dict[str, list[str]] = {"auth": [], "data": []}  # one-shot answers, e.g. "554 refused"

    def failure(self, step: str) -> str | None:
        with self.lock:
            return self.failures[step].pop(0) if self.failures[step] else None

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 - aiosmtpd's hook name
        failed = self.failure("data")
        if failed is not None:
            return failed
        parsed = email.message_from_bytes(envelope.content, policy=email.policy.default)
        with self.lock:
            self.messages.append(parsed)  # type: ignore[arg-type]
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 Message accepted for delivery"


class SmtpReceiver:
    """An SMTP server that accepts ``USER``/``PASSWORD`` (any other login is refused, 535) and keeps each mail."""

    def __init__(self, *, tls: TestCertificate | None = None, implicit: bool = False, relay: bool = False) -> None:
        """With ``tls``: STARTTLS offered, or (``implicit``) TLS from the first byte. A ``relay`` is a relay for
        its own network (Postfix's ``mynetworks``): no AUTH in its EHLO answer, every mail taken without one."""
        self.recorder = _Recorder()
        self.port = free_port()

        def authenticate(server, session, envelope, mechanism, auth_data) -> AuthResult:
            # a failure holds for the rest of its session: a client tries each mechanism in turn
            failed = getattr(session, "failed_auth", None) or self.recorder.failure("auth")
            if failed is not None:
                session.failed_auth = failed
                return AuthResult(success=False, handled=False, message=failed)
            ok = (isinstance(auth_data, LoginPassword) and auth_data.login.decode() == USER
                  and auth_data.password.decode() == PASSWORD)
            return AuthResult(success=ok, handled=False)

        context = tls.server_context() if tls else None
        self.controller = Controller(self.recorder, hostname="127.0.0.1", port=self.port, authenticator=authenticate,
                                     # AUTH is advertised only over TLS when it requires TLS: never, for a relay
                                     auth_require_tls=relay, auth_required=not relay,
                                     **({"ssl_context": context} if implicit else {"tls_context": context}))

    def start(self) -> SmtpReceiver:
        logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd logs each line it is sent at DEBUG
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()

    @property
    def messages(self) -> list[EmailMessage]:
        with self.recorder.lock:
            return list(self.recorder.messages)

    def fail(self, step: str, answer: str) -> None:
        """The next ``step`` ("auth" or "data") is answered ``answer`` (a status line: "454 4.7.0 …")."""
        with self.recorder.lock:
            self.recorder.failures[step].append(answer)

    def clear(self) -> None:
        with self.recorder.lock:
            self.recorder.failures = {"auth": [], "data": []}
            self.recorder.messages.clear()
            self.recorder.envelopes.clear()

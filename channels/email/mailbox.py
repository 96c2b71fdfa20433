"""One IMAP session on a connection's INBOX (``aioimaplib``), in the few verbs the listener needs.

Opened with the connection's TLS choice (``ssl``: IMAPS; ``starttls``: plain then upgraded, as
aioimaplib has no STARTTLS of its own; ``none``: plain), logged in, INBOX selected with its
UIDVALIDITY. Mail is read with ``BODY.PEEK[]`` so nothing is marked seen by reading it; what was
processed is tracked by UID by the listener. ``wait`` is IDLE when the server has it, a pause
otherwise. A refused login, or a server certificate not trusted, raises ``ImapRefused`` with the
reason (the operator must act); a network failure or a server gone away raises ``ImapUnavailable``.
"""

from __future__ import annotations

import asyncio
import re
import ssl

import aioimaplib

from channels.email.certificate import untrusted_certificate
from gateway.channel import Connection

__all__ = ["IDLE_RENEW_S", "ImapRefused", "ImapUnavailable", "Mailbox", "check_imap"]

TIMEOUT_S = 30.0
IDLE_RENEW_S = 25 * 60  # RFC 2177: re-issue IDLE at least every 29 minutes
_UIDVALIDITY = re.compile(rb"\[UIDVALIDITY (\d+)\]")
_SIZE = re.compile(rb"UID (\d+) RFC822\.SIZE (\d+)|RFC822\.SIZE (\d+) UID (\d+)")


class ImapRefused(Exception):
    """The server refused the login (or has no INBOX): its reason, for the operator."""


class ImapUnavailable(Exception):
    """The server could not be reached, or went away mid-session: worth another try."""


def _said(response: aioimaplib.Response) -> str:
    return " ".join(line.decode(errors="replace") for line in response.lines if isinstance(line, bytes)).strip()


class Mailbox:
    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.client: aioimaplib.IMAP4 | None = None
        self.uidvalidity = 0

    async def __aenter__(self) -> Mailbox:
        try:
            await asyncio.wait_for(self._open(), TIMEOUT_S)
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _open(self) -> None:
        host, port = self.connection.secret("imap_host"), int(self.connection.secret("imap_port"))
        tls = self.connection.secret("tls") or "ssl"
        try:
            if tls == "ssl":
                self.client = aioimaplib.IMAP4_SSL(host, port, timeout=TIMEOUT_S)
            else:
                self.client = aioimaplib.IMAP4(host, port, timeout=TIMEOUT_S)
            await self.client.wait_hello_from_server()
            if tls == "starttls":
                await self._starttls(host)
            login = await self.client.login(self.connection.secret("username"), self.connection.secret("password"))
        except (TimeoutError, OSError, aioimaplib.AioImapException) as exc:
            if (untrusted := untrusted_certificate(exc, "IMAP", host)) is not None:
                raise ImapRefused(untrusted) from None
            raise ImapUnavailable(f"IMAP server unreachable: {type(exc).__name__}: {exc}") from None
        if login.result != "OK":
            raise ImapRefused(f"IMAP login refused: {_said(login) or login.result}")
        selected = await self._call(self.client.select("INBOX"))
        if selected.result != "OK":
            raise ImapRefused(f"IMAP could not open INBOX: {_said(selected) or selected.result}")
        found = next((m for line in selected.lines if isinstance(line, bytes)
                      for m in [_UIDVALIDITY.search(line)] if m), None)
        self.uidvalidity = int(found.group(1)) if found else 0

    async def _starttls(self, host: str) -> None:
        assert self.client is not None
        protocol = self.client.protocol
        answer = await protocol.execute(aioimaplib.Command("STARTTLS", protocol.new_tag(), loop=protocol.loop))
        if answer.result != "OK":
            raise ImapRefused(f"IMAP STARTTLS refused: {_said(answer) or answer.result}")
        loop = asyncio.get_running_loop()
        protocol.transport = await loop.start_tls(protocol.transport, protocol, ssl.create_default_context(),
                                                  server_hostname=host)
        await protocol.capability()  # what it offers may differ once encrypted

    async def _call(self, pending) -> aioimaplib.Response:
        try:
            return await asyncio.wait_for(pending, TIMEOUT_S)
        except (TimeoutError, OSError, aioimaplib.AioImapException) as exc:
            raise ImapUnavailable(f"IMAP: {type(exc).__name__}: {exc}") from None

    async def close(self) -> None:
        client, self.client = self.client, None
        if client is None:
            return
        try:
            if client.has_pending_idle():
                client.idle_done()
            await asyncio.wait_for(client.logout(), 5)
        except Exception:  # already gone: nothing to say goodbye to
            pass

    @property
    def _client(self) -> aioimaplib.IMAP4:
        if self.client is None:
            raise ImapUnavailable("IMAP session closed")
        return self.client

    async def refresh(self) -> None:
        """NOOP: a server may add mail delivered meanwhile to the session's view only at the next command's
        end (Dovecot does), so a search right after would not see it."""
        await self._call(self._client.noop())

    async def search(self, *criteria: str) -> list[int]:
        answer = await self._call(self._client.uid_search(*criteria))
        if answer.result != "OK":
            raise ImapUnavailable(f"IMAP search failed: {_said(answer)}")
        # the result is the line of numbers only: untagged news may come first ("3 EXISTS", "1 RECENT")
        found: set[int] = set()
        for line in answer.lines[:-1]:
            tokens = bytes(line).split()
            if tokens and all(t.isdigit() for t in tokens):
                found.update(int(t) for t in tokens)
        return sorted(found)

    async def sizes(self, uids: list[int]) -> dict[int, int]:
        if not uids:
            return {}
        answer = await self._call(self._client.uid("fetch", ",".join(map(str, uids)), "(UID RFC822.SIZE)"))
        sizes: dict[int, int] = {}
        for line in answer.lines:
            found = _SIZE.search(bytes(line))
            if found:
                uid, size = (found.group(1), found.group(2)) if found.group(1) else (found.group(4), found.group(3))
                sizes[int(uid)] = int(size)
        return sizes

    async def fetch(self, uid: int, *, headers_only: bool = False) -> bytes | None:
        """The mail's bytes (or only its header), unmarked; None when it is gone (expunged meanwhile)."""
        part = "BODY.PEEK[HEADER]" if headers_only else "BODY.PEEK[]"
        answer = await self._call(self._client.uid("fetch", str(uid), f"({part})"))
        literal = next((line for line in answer.lines if isinstance(line, bytearray)), None)
        return bytes(literal) if literal is not None else None

    async def wait(self, timeout_s: float) -> None:
        """Until the server says something changed (IDLE), or ``timeout_s`` passed (polling without IDLE)."""
        client = self._client
        if not client.has_capability("IDLE"):
            await asyncio.sleep(timeout_s)
            await self._call(client.noop())  # keeps the session, and fails when the server is gone
            return
        try:
            idle = await asyncio.wait_for(client.idle_start(timeout=min(timeout_s, IDLE_RENEW_S)), TIMEOUT_S)
            await client.wait_server_push(timeout=min(timeout_s, IDLE_RENEW_S) + 5)
            client.idle_done()
            await asyncio.wait_for(idle, TIMEOUT_S)
        except (TimeoutError, OSError, aioimaplib.AioImapException) as exc:
            raise ImapUnavailable(f"IMAP IDLE: {type(exc).__name__}: {exc}") from None


async def check_imap(connection: Connection) -> None:
    """Login and INBOX; ``ImapRefused`` with the server's reason, ``ImapUnavailable`` when unreachable."""
    async with Mailbox(connection):
        return None

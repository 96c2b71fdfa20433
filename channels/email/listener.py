"""A connection's mailbox, watched: each new mail into the durable inbox, then marked processed.

Run by ``ConnectionListeners`` (one replica holds a mailbox at a time, behind a Redis lease). New mail
is found by UID: Redis keeps the mailbox's UIDVALIDITY and the last UID taken. A mail goes into the
inbox first (deduplicated by its Message-ID within the connection), and only then is its UID written
as taken: a listener killed in between takes it again, and the inbox drops the copy — nothing lost,
nothing answered twice. The first look at a mailbox (or at one whose UIDs were renumbered) takes what
is unread; what was read before the connection existed is not answered.

Mail not to be answered (``filters.never_answered``) is logged and counted under
``switchboard_rejected_requests_total{channel="email", reason=...}``; a mail over
``SWITCHBOARD_EMAIL_MAX_BYTES`` is queued from its headers only, with a note saying why.
"""

from __future__ import annotations

import asyncio
import logging

from channels.email.filters import never_answered
from channels.email.mailbox import ImapRefused, ImapUnavailable, Mailbox
from channels.email.message import message_ids, parse_bytes, read_mail
from channels.email.sent import sent_thread
from gateway.channel import ChannelContext, Connection, delivery_id, order_key

__all__ = ["CHANNEL", "MailboxListener"]

log = logging.getLogger(__name__)
CHANNEL = "email"
RETRY_MAX_S = 60.0


class MailboxListener:
    def __init__(self, context: ChannelContext) -> None:
        self.context = context
        self.poll_s = context.settings.email_poll_s
        self.max_bytes = context.settings.email_max_bytes

    def _key(self, connection: Connection) -> str:
        return self.context.store.key("email", connection.id, "uids")

    async def listen(self, connection: Connection) -> None:
        """Until cancelled: a session on the mailbox, drained and waited on; opened again after a failure."""
        pause = 1.0
        while True:
            try:
                async with Mailbox(connection) as box:
                    pause = 1.0
                    while True:
                        await self.drain(box, connection)
                        await box.wait(self.poll_s)
            except ImapRefused as exc:  # wrong password, mailbox gone: the operator must act
                await self._noted(connection, str(exc))
                await asyncio.sleep(max(self.poll_s, RETRY_MAX_S))
            except ImapUnavailable as exc:
                log.warning("email connection %s: %s; trying again in %.0f s", connection.id,
                            connection.redact(str(exc)), pause)
                await self._noted(connection, str(exc))
                await asyncio.sleep(pause)
                pause = min(pause * 2, RETRY_MAX_S)

    async def _noted(self, connection: Connection, error: str) -> None:
        error = connection.redact(error)  # a server's words may echo what it was sent
        if self.context.connections is not None:
            try:
                await self.context.connections.note_error(connection, error)
            except Exception:  # Redis away as well: the log has it
                log.warning("email connection %s: %s", connection.id, error)

    async def drain(self, box: Mailbox, connection: Connection) -> None:
        """Every mail not taken yet, in UID order, each queued and then marked taken."""
        redis = self.context.store.redis
        await box.refresh()
        state = await redis.hgetall(self._key(connection))
        validity = int(state.get(b"validity", state.get("validity", 0)) or 0)
        last = int(state.get(b"last", state.get("last", 0)) or 0)
        if validity != box.uidvalidity:  # a first look: the unread mail is new, what was read is not
            everything = await box.search("ALL")
            unseen = await box.search("UNSEEN")
            await self._take(box, connection, unseen)
            newest = max([*everything, *unseen], default=0)
            await redis.hset(self._key(connection), mapping={"validity": box.uidvalidity, "last": newest})
            return
        newer = [uid for uid in await box.search("UID", f"{last + 1}:*") if uid > last]  # n:* names the last too
        await self._take(box, connection, newer)

    async def _take(self, box: Mailbox, connection: Connection, uids: list[int]) -> None:
        sizes = await box.sizes(uids)
        for uid in uids:
            await self._queue(box, connection, uid, sizes.get(uid, 0))
            await self.context.store.redis.hset(self._key(connection), mapping={"validity": box.uidvalidity,
                                                                                "last": uid})

    async def _queue(self, box: Mailbox, connection: Connection, uid: int, size: int) -> None:
        over = size > self.max_bytes
        raw = await box.fetch(uid, headers_only=over)
        if raw is None:
            return  # expunged since the search
        message = parse_bytes(raw)
        own_id = (message_ids(message.get("Message-ID")) or (None,))[0]
        ours = await sent_thread(self.context, connection.id, own_id) is not None
        reason = never_answered(message, own_address=connection.secret("address"), ours=ours)
        if reason is not None:
            self.context.metrics.rejected.labels(CHANNEL, reason).inc()
            log.info("email connection %s: mail %s not answered (%s)", connection.id, own_id or f"uid {uid}", reason)
            return
        in_reply_to = (message_ids(message.get("In-Reply-To")) or (None,))[0]
        root = await sent_thread(self.context, connection.id, in_reply_to)
        note = (f"[a mail of {size} bytes, over the {self.max_bytes}-byte limit: only its headers were read]"
                if over else None)
        try:
            mail = read_mail(message, note=note, root=root,
                             fallback_id=f"<uid-{box.uidvalidity}-{uid}@{connection.id}.switchboard>")
        except Exception:  # a mail no parser reads must not hold up the mailbox behind it
            self.context.metrics.rejected.labels(CHANNEL, "unreadable").inc()
            log.exception("email connection %s: mail %s could not be read; not answered", connection.id,
                          own_id or f"uid {uid}")
            return
        if not mail.sender:
            self.context.metrics.rejected.labels(CHANNEL, "no_sender").inc()
            log.info("email connection %s: mail %s has no sender address; not answered", connection.id,
                     mail.message_id)
            return
        if over:
            log.info("email connection %s: mail %s is %d bytes, over the limit; its body was not read",
                     connection.id, mail.message_id, size)
        await self.context.ack_delivery(CHANNEL, delivery_id(connection.id, mail.message_id),
                                        order_key(connection.id, mail.thread), mail.model_dump_json())

"""The mailbox listener against Dovecot, one drain at a time: what it queues in the inbox and marks taken.

A listener that dies after queueing a mail but before marking its UID queues it again on the next
look, and the inbox keeps one; mail read before the connection existed is not taken; a mailbox whose
UIDs were renumbered (a new UIDVALIDITY) is looked at afresh, and what is queued already stays once.
"""

from __future__ import annotations

import imaplib

from channels.email.listener import MailboxListener
from channels.email.mailbox import Mailbox
from gateway.channel import Connection
from tests.channels.mail_support import credentials, mail
from tests.fakes.mail_server import PASSWORD, USER


async def _queued(services) -> list[str]:
    rows = await services.redis.xrange(services.inbox.stream)
    return [fields[b"d"].decode().split("/", 1)[1] for _, fields in rows]


async def test_a_mail_queued_but_not_marked_is_queued_once(keyed_services, mailbox, smtp) -> None:
    seen_before = mail("an old question, already read by a person")
    mailbox.deliver(seen_before)
    with imaplib.IMAP4("127.0.0.1", mailbox.port) as imap:
        imap.login(USER, PASSWORD)
        imap.select("INBOX")
        imap.store("1", "+FLAGS", "(\\Seen)")
    context = keyed_services.channel_context()
    connection = await context.connections.save(Connection(kind="email", name="box",
                                                            credentials=credentials(mailbox, smtp)))
    listener = MailboxListener(context)
    key = context.store.key("email", connection.id, "uids")
    first, second = mail("first question"), mail("second question")
    mailbox.deliver(first)
    async with Mailbox(connection) as box:
        await listener.drain(box, connection)  # the first look: the unread mail only
        assert await _queued(keyed_services) == [first["Message-ID"]]
        mailbox.deliver(second)
        await listener.drain(box, connection)
        assert await _queued(keyed_services) == [first["Message-ID"], second["Message-ID"]]

        last = int(await keyed_services.redis.hget(key, "last"))
        await keyed_services.redis.hset(key, "last", last - 2)  # died after queueing both, before marking them
        await listener.drain(box, connection)
        assert await _queued(keyed_services) == [first["Message-ID"], second["Message-ID"]]  # taken again, kept once
        assert int(await keyed_services.redis.hget(key, "last")) == last

        await keyed_services.redis.hset(key, "validity", 1)  # the mailbox's UIDs renumbered
        await listener.drain(box, connection)
        assert await _queued(keyed_services) == [first["Message-ID"], second["Message-ID"]]
        assert int(await keyed_services.redis.hget(key, "validity")) == box.uidvalidity
    assert seen_before["Message-ID"] not in await _queued(keyed_services)

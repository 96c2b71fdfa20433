"""E-mail connections (kind ``email``): a support mailbox answered in each customer's thread.

Nothing posts to us: each enabled connection's mailbox is watched over IMAP by one replica
(``listener``, run by ``ConnectionListeners``), each new mail queued in the inbox as a ``Mail``. The
inbox hands it back here: a mail with text is a turn in the conversation of its thread (one per
thread), one with only attachments or over the size cap is recorded and answered with a short text;
the reply goes out by SMTP in the thread. Verifying a connection logs in to both servers (a refusal
is a 422 with the server's reason, nothing stored); nothing is undone on delete.
"""

from __future__ import annotations

from fastapi import Request, Response
from pydantic import ValidationError

from channels.connection_capabilities import EMAIL
from channels.email.listener import CHANNEL, MailboxListener
from channels.email.mailbox import ImapRefused, ImapUnavailable, check_imap
from channels.email.message import Mail
from channels.email.sender import EmailSink
from channels.email.smtp import SmtpRefused, check_smtp
from channels.listeners import ConnectionListeners
from channels.masking import MaskedSink
from channels.media_answer import answer_media, record_media
from channels.outbound_retry import RetryPolicy
from gateway.channel import (
    Attachment,
    ChannelContext,
    Connection,
    CredentialsRefused,
    Delivery,
    DeliveryRejected,
    InboundMessage,
    NotFound,
    SendWork,
    TurnWork,
    VendorUnreachable,
    Work,
    scoped,
)

__all__ = ["EmailConnections", "build_connections"]


class EmailConnections:
    capabilities = EMAIL

    def __init__(self, context: ChannelContext) -> None:
        self.context = context
        self.policy = RetryPolicy.from_settings(context.settings)
        self.listeners = ConnectionListeners(context, "email", MailboxListener(context).listen)
        self.listeners.start()

    async def stop(self) -> None:
        await self.listeners.stop()

    async def webhook(self, request: Request, connection: Connection) -> Response:
        raise NotFound("an email connection has no webhook: its mailbox is read over IMAP")

    @staticmethod
    def mail(delivery: Delivery) -> Mail:
        try:
            return Mail.model_validate_json(delivery.body)
        except ValidationError as exc:
            raise DeliveryRejected("not a queued mail") from exc

    def _inbound(self, mail: Mail, text: str) -> InboundMessage:
        return InboundMessage(
            channel=CHANNEL, external_user_id=mail.sender, external_message_id=mail.message_id,
            identity=f"email:{mail.sender}", text=text, thread=mail.thread, display_name=mail.name,
            attachments=tuple(Attachment(kind="file", mime_type=a.type, size=a.size, description=a.described())
                              for a in mail.attachments))

    async def accept(self, delivery: Delivery, connection: Connection) -> Work | None:
        mail = self.mail(delivery)
        sink = self._sink(mail, connection)
        if mail.text:
            turn = await self.context.pipeline.accept(scoped(self._inbound(mail, mail.prompt_text()), connection),
                                                      delivery_id=delivery.id)
            return None if turn is None else TurnWork(turn, sink)
        # nothing typed (only attachments, or a body over the cap): recorded, answered without the model
        if not await self.context.store.claim_once("msg", CHANNEL, delivery.dedup_id):
            return None
        where = await record_media(self.context, scoped(self._inbound(mail, mail.prompt_text()), connection))
        masked = MaskedSink.of(sink, connection, self.context)
        return SendWork(lambda: answer_media(self.context, masked, CHANNEL, *where),
                        what=f"email attachments answer ({connection.id})")

    def _sink(self, mail: Mail, connection: Connection) -> EmailSink:
        return EmailSink(self.context, connection, mail, self.policy, self.capabilities)

    def sink_for(self, delivery: Delivery, connection: Connection) -> EmailSink:
        return self._sink(self.mail(delivery), connection)

    async def verify(self, connection: Connection, webhook_url: str) -> str | None:
        try:
            await check_imap(connection)
            await check_smtp(connection)
        except (ImapRefused, SmtpRefused) as exc:
            raise CredentialsRefused(f"credentials: {exc}") from None
        except (ImapUnavailable, OSError, TimeoutError) as exc:
            raise VendorUnreachable(f"the mail server could not be reached: {exc}") from exc
        return connection.secret("address")

    async def forget(self, connection: Connection) -> None:
        """The mailbox is the operator's: only what we kept of it (the UIDs taken) goes."""
        await self.context.store.redis.delete(self.context.store.key("email", connection.id, "uids"))


def build_connections(context: ChannelContext) -> EmailConnections:
    return EmailConnections(context)

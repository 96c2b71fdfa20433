"""An email connection's reply: one mail in the customer's thread, sent by SMTP with retries.

Its Message-ID is remembered with the thread (``sent``): the customer's next mail finds its
conversation by it, and our own mail coming back is never answered.
"""

from __future__ import annotations

from channels.connections import note_delivery
from channels.delivery import deliver_parts
from channels.email.message import Mail
from channels.email.sent import remember_sent
from channels.email.smtp import reply_to, send
from channels.outbound_retry import RetryPolicy
from channels.render import render
from gateway.channel import Capabilities, ChannelContext, Connection, DeliveryReport

__all__ = ["EmailSink"]


class EmailSink:
    streaming = False

    def __init__(self, context: ChannelContext, connection: Connection, mail: Mail, policy: RetryPolicy,
                 capabilities: Capabilities) -> None:
        self.context, self.connection, self.mail = context, connection, mail
        self.policy, self.capabilities = policy, capabilities

    async def delta(self, text: str) -> None:  # pragma: no cover - not streaming
        raise NotImplementedError

    async def _part(self, text: str) -> str:
        reply = reply_to(self.mail, text, self.connection)
        message_id = str(reply["Message-ID"])
        # remembered before it goes: a copy that comes back at once is known as ours
        await remember_sent(self.context, self.connection.id, message_id, self.mail.thread)
        await send(reply, self.connection)
        return message_id

    async def deliver(self, text: str) -> DeliveryReport:
        report = await deliver_parts(render(text, self.capabilities), self._part, self.policy, what="email")
        return await note_delivery(self.context, self.connection, report)


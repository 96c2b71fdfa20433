"""A Meta connection's reply: rendered for the platform, sent part by part through the Graph API.

Each part's Meta message id is remembered with the reply's turn, so a later status (delivered, read,
failed) finds it. A WhatsApp refusal outside the 24-hour window (131047) is said in plain words, counted
in the connection's status and never dropped: it is the reply's delivery error.
"""

from __future__ import annotations

import logging

from channels.connections import note_delivery
from channels.delivery import deliver_parts
from channels.errors import ChannelRejected
from channels.meta.graph import Graph, GraphRefused
from channels.meta.platform import Platform, Received
from channels.meta.templates import approved_templates, template_message
from channels.outbound_retry import RetryPolicy, send_with_retry
from channels.render import render
from channels.reply_outcome import remember_sent
from gateway.channel import ChannelContext, ChannelDeliveryError, Connection, DeliveryReport, MessageTemplate

__all__ = ["OUTSIDE_WINDOW", "MetaSink", "refused_outside_window"]

log = logging.getLogger(__name__)
OUTSIDE_WINDOW = 131047  # WhatsApp: more than 24 hours since the customer last wrote


def refused_outside_window() -> str:
    return (f"WhatsApp refused a free-form reply outside the 24-hour customer-service window "
            f"(Meta {OUTSIDE_WINDOW}): waiting for a template message")


class MetaSink:
    streaming = False
    typing_interval_s = 20.0  # WhatsApp's indicator lasts 25 s, Messenger's 20 s

    def __init__(self, graph: Graph, platform: Platform, received: Received, policy: RetryPolicy,
                 context: ChannelContext, connection: Connection, turn_id: str | None = None) -> None:
        self.graph, self.platform, self.received, self.policy = graph, platform, received, policy
        self.context, self.connection = context, connection
        self.channel = platform.channel
        self.turn_id = turn_id  # the turn whose reply this is: a later status is written there

    @property
    def _token(self) -> str:
        return self.connection.secret(self.platform.token_field)

    async def delta(self, text: str) -> None:  # pragma: no cover - not streaming
        raise NotImplementedError

    async def typing(self) -> None:
        await self.graph.call("POST", self.platform.send_path(self.connection), self._token,
                              json=self.platform.typing_message(self.received), what="typing")

    async def send(self, payload: dict, *, what: str = "messages", stored_message_id: str | None = None) -> str:
        """One message out; its Meta id, remembered for its statuses. A 24-hour refusal in plain words."""
        try:
            answer = await self.graph.call("POST", self.platform.send_path(self.connection), self._token,
                                           json=payload, what=what)
        except GraphRefused as exc:
            if exc.code == OUTSIDE_WINDOW:
                raise GraphRefused(refused_outside_window(), exc.code) from exc
            raise
        sent = self.platform.sent_id(answer)
        await remember_sent(self.context, self.channel, self.connection.id, sent, turn_id=self.turn_id,
                            stored_message_id=stored_message_id)
        return sent

    async def _part(self, part: str) -> str:
        return await self.send(self.platform.text_message(self.received.sender, part))

    async def deliver(self, text: str) -> DeliveryReport:
        report = await deliver_parts(render(text, self.platform.capabilities), self._part, self.policy,
                                     what=f"meta {self.channel}")
        if not report.delivered and report.error and str(OUTSIDE_WINDOW) in report.error:
            await refusal_noted(self.context, self.connection)
        return await note_delivery(self.context, self.connection, report)

    async def templates(self) -> list[MessageTemplate]:
        if not self.platform.capabilities.templates:
            raise ChannelRejected(f"{self.channel} has no message templates")
        return await approved_templates(self.graph, self.connection)

    async def send_template(self, template: MessageTemplate, stored_message_id: str) -> DeliveryReport:
        """A template goes out even past the 24-hour window; once it does, nothing waits for one."""
        payload = template_message(self.received.sender, template)
        try:
            sent = await send_with_retry(
                lambda: self.send(payload, what="template", stored_message_id=stored_message_id), self.policy,
                what=f"meta {self.channel} template")
        except ChannelDeliveryError as exc:
            report = DeliveryReport(delivered=False, error=exc.message)
        else:
            report = DeliveryReport(delivered=True, external_ids=(sent,))
            if self.context.connections is not None:
                await self.context.connections.note(self.connection.id, waiting_for_template=0)
        return await note_delivery(self.context, self.connection, report)

    async def say(self, text: str) -> None:
        report = await self.deliver(text)
        if not report.delivered:
            raise ChannelDeliveryError(report.error or f"{self.channel} send failed")


async def refusal_noted(context: ChannelContext, connection: Connection) -> None:
    if context.connections is not None:
        await context.connections.count_refusal(connection.id)
    log.warning("%s connection %s: a reply was refused outside the 24-hour window", connection.kind, connection.id)

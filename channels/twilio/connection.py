"""Twilio numbers added as connections (SMS): each its own account, number, signature and agent.

The webhook at ``/channels/twilio/{id}/sms`` is verified with the connection's auth token and
answers STOP/START/HELP like the environment number (opt-outs kept per connection). Verifying
fetches the account (``GET /Accounts/<sid>.json``). The number's SmsUrl is not changed: the
operator pastes the webhook URL into the number's Messaging configuration (docs/guides/twilio-sms.md),
so a number that serves something else is never rewired by a save.
"""

from __future__ import annotations

import json

from fastapi import Request, Response
from pydantic import ValidationError

from channels.connections import note_delivery
from channels.errors import ChannelRejected, ChannelUnavailable
from channels.outbound_retry import RetryPolicy
from channels.twilio.rest import SmsWebhook, TwilioRest, verified_form
from channels.twilio.sms import (
    CAPABILITIES,
    CHANNEL,
    OptOuts,
    SmsSink,
    answered_in_webhook,
    inbound_of,
    queued_sms,
    twiml,
)
from gateway.channel import (
    BadRequest,
    ChannelContext,
    Connection,
    CredentialsRefused,
    Delivery,
    DeliveryReport,
    TurnWork,
    VendorUnreachable,
    delivery_id,
    order_key,
    scoped,
)

__all__ = ["TwilioConnections", "build_connections", "twilio_account"]


class ConnectionSmsSink(SmsSink):
    def __init__(self, rest: TwilioRest, opt_outs: OptOuts, to: str, from_: str, policy: RetryPolicy,
                 context: ChannelContext, connection: Connection) -> None:
        super().__init__(rest, opt_outs, to, from_, policy)
        self.context = context
        self.connection = connection

    async def deliver(self, text: str) -> DeliveryReport:
        return await note_delivery(self.context, self.connection, await super().deliver(text))

    async def deliver_keyed(self, text: str, key: str) -> DeliveryReport:
        return await note_delivery(self.context, self.connection, await super().deliver_keyed(text, key))


class TwilioClients:
    """One REST client per connection, replaced when its credentials change."""

    def __init__(self, context: ChannelContext) -> None:
        self.context = context
        self._clients: dict[str, tuple[tuple[str, str], TwilioRest]] = {}
        self._retired: list[TwilioRest] = []

    def rest(self, connection: Connection, sender: str) -> TwilioRest:
        account = (connection.secret("account_sid"), connection.secret("auth_token"))
        known = self._clients.get(connection.id)
        if known is not None and known[0] == account and known[1].from_number == sender:
            return known[1]
        if known is not None:
            self._retired.append(known[1])
        rest = TwilioRest(self.context, account, sender)
        self._clients[connection.id] = (account, rest)
        return rest

    async def close(self) -> None:
        for rest in [r for _, r in self._clients.values()] + self._retired:
            await rest.close()


async def twilio_account(context: ChannelContext, connection: Connection) -> str:
    """The account's name, checked with Twilio; the errors a connection save understands."""
    rest = TwilioRest(context, (connection.secret("account_sid"), connection.secret("auth_token")))
    try:
        return await rest.account_name()
    except ChannelRejected:
        raise CredentialsRefused("credentials.auth_token: Twilio refused the account SID and auth token") from None
    except ChannelUnavailable as exc:
        raise VendorUnreachable(exc.message) from exc
    finally:
        await rest.close()


class TwilioAccountConnections:
    """What every Twilio kind shares: a REST client per connection, the account check, nothing to undo."""

    def __init__(self, context: ChannelContext) -> None:
        self.context = context
        self.policy = RetryPolicy.from_settings(context.settings)
        self.clients = TwilioClients(context)

    async def stop(self) -> None:
        await self.clients.close()

    async def verify(self, connection: Connection, webhook_url: str) -> str | None:
        return await twilio_account(self.context, connection)

    async def forget(self, connection: Connection) -> None:
        return None  # the number's webhook URL was set by the operator in Twilio's console; nothing to undo


class TwilioConnections(TwilioAccountConnections):
    capabilities = CAPABILITIES

    async def webhook(self, request: Request, connection: Connection) -> Response:
        form = await verified_form(request, self.context, CHANNEL, connection.secret("auth_token"))
        try:
            sms = SmsWebhook.model_validate(form)
        except ValidationError as exc:
            raise BadRequest("not a Twilio SMS webhook (MessageSid, From, To expected)") from exc
        answer = await answered_in_webhook(sms, OptOuts(self.context.store, connection.id), self.context.settings)
        if answer is not None:
            return answer
        await self.context.ack_delivery(CHANNEL, delivery_id(connection.id, sms.message_sid),
                                        order_key(connection.id, sms.from_), json.dumps(form))
        return twiml()

    async def accept(self, delivery: Delivery, connection: Connection) -> TurnWork | None:
        sms = queued_sms(delivery)
        if await OptOuts(self.context.store, connection.id).opted_out(sms.from_):
            return None
        scope = await self.context.connections.persona_scope(connection)  # shared with the number's calls
        turn = await self.context.pipeline.accept(scoped(inbound_of(sms), connection, scope), delivery_id=delivery.id)
        return None if turn is None else TurnWork(turn, self.sink_for(delivery, connection))

    def sink_for(self, delivery: Delivery, connection: Connection) -> ConnectionSmsSink:
        sms = queued_sms(delivery)
        sender = connection.secret("phone_number") or sms.to
        return ConnectionSmsSink(self.clients.rest(connection, sender), OptOuts(self.context.store, connection.id),
                                 sms.from_, sender, self.policy, self.context, connection)


def build_connections(context: ChannelContext) -> TwilioConnections:
    return TwilioConnections(context)

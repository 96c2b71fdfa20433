"""Twilio voice numbers added as connections: each its own account, signature, agent and URLs.

Twilio calls ``/channels/twilio/<id>/voice`` (the number's "A call comes in" URL); the answer is the
environment number's (``channels.twilio.voice``: ConversationRelay or Gather per
``SWITCHBOARD_TWILIO_VOICE_MODE``) on the connection's ``Line``: its Gather, status and
``<Connect action>`` URLs under that path, and its relay socket ``/channels/twilio/<id>/relay``, whose
tickets open no other number's socket. Every webhook and the socket's upgrade are checked with the
connection's auth token. Verifying fetches the account, as for SMS; the number's VoiceUrl is not changed.
"""

from __future__ import annotations

from fastapi import Request, Response, WebSocket

from channels.twilio.connection import TwilioAccountConnections
from channels.twilio.line import Line
from channels.twilio.relay import relay_of
from channels.twilio.voice import CAPABILITIES, TwilioVoiceAdapter
from gateway.channel import ChannelContext, Connection, Delivery, DeliveryRejected, ReplySink, Work

__all__ = ["TwilioVoiceConnections", "build_connections"]


class TwilioVoiceConnections(TwilioAccountConnections):
    capabilities = CAPABILITIES

    def __init__(self, context: ChannelContext) -> None:
        super().__init__(context)
        self.calls = TwilioVoiceAdapter(context)
        self.relay = relay_of(context)  # held: the environment's and the connections' sockets share its caps

    async def stop(self) -> None:
        await super().stop()
        await self.calls.stop()

    async def webhook(self, request: Request, connection: Connection) -> Response:
        return await self.calls.answer(request, await Line.of(self.context, connection))

    async def socket(self, ws: WebSocket, connection: Connection) -> None:
        await self.relay.serve(ws, await Line.of(self.context, connection))

    # a call's turns run from its webhooks and socket, never through the inbox
    async def accept(self, delivery: Delivery, connection: Connection) -> Work | None:
        raise DeliveryRejected("a voice call's turns are not queued in the inbox")

    def sink_for(self, delivery: Delivery, connection: Connection) -> ReplySink:
        raise DeliveryRejected("a voice call's turns are not queued in the inbox")


def build_connections(context: ChannelContext) -> TwilioVoiceConnections:
    return TwilioVoiceConnections(context)

"""The number a call reached: the environment's (``SWITCHBOARD_TWILIO_*``) or a console-added connection's.

A line says which auth token signs its webhooks and relay socket, the paths Twilio is told (its Gather,
status and ``<Connect action>`` URLs under ``voice_path``, its socket at ``relay_path``), whose agent
answers, and how its callers are keyed: ``phone:+E164`` on the environment's number, scoped by the
number's line on a connection (``ConnectionStore.persona_scope``), so a caller and their texts to the
same number are one customer either way. A connection's replies cross its vendor boundary and go into
its status (``NotedSink``).
"""

from __future__ import annotations

from dataclasses import dataclass

from channels.connections import NotedSink, now, persona_scope
from channels.masking import MaskedSink
from channels.twilio.relay_tickets import RELAY_PATH
from gateway.channel import ChannelContext, Connection, InboundMessage, ReplySink, Settings, scope_identity, scoped

__all__ = ["ENVIRONMENT_VOICE_PATH", "Line"]

ENVIRONMENT_VOICE_PATH = "/channels/twilio/voice"


@dataclass(frozen=True)
class Line:
    auth_token: str | None
    voice_path: str = ENVIRONMENT_VOICE_PATH  # the incoming-call webhook; ``/turn``, ``/status``… under it
    relay_path: str = RELAY_PATH
    connection: Connection | None = None  # None: the environment's number
    persona_scope: str | None = None

    @classmethod
    def environment(cls, settings: Settings) -> Line:
        token = settings.twilio_auth_token
        return cls(token.get_secret_value() if token is not None else None)

    @classmethod
    async def of(cls, context: ChannelContext, connection: Connection) -> Line:
        base = f"/channels/twilio/{connection.id}"
        return cls(connection.secret("auth_token"), base + "/voice", base + "/relay", connection,
                   await persona_scope(context, connection))

    @property
    def connection_id(self) -> str | None:
        return None if self.connection is None else self.connection.id

    def identity(self, caller: str) -> str:
        identity = f"phone:{caller}"
        if self.connection is None:
            return identity
        return scope_identity(identity, self.persona_scope or self.connection.id)

    def inbound(self, channel: str, caller: str, message_id: str, text: str, thread: str) -> InboundMessage:
        """What the caller said, as this line's message (its connection's agent, its scoped identity)."""
        inbound = InboundMessage(channel=channel, external_user_id=caller, external_message_id=message_id,
                                 identity=f"phone:{caller}", text=text, thread=thread)
        return inbound if self.connection is None else scoped(inbound, self.connection, self.persona_scope)

    def key_parts(self, *parts: str) -> tuple[str, ...]:
        """A call's Redis key parts, within the connection: another account's signed webhook naming this
        call's ``CallSid`` reads or ends nothing of it."""
        return parts if self.connection is None else (self.connection.id, *parts)

    async def note_call(self, context: ChannelContext) -> None:
        """A call came in: the connection's ``last_inbound_at`` (the Channels screen shows it)."""
        if self.connection is not None and context.connections is not None:
            await context.connections.note(self.connection.id, last_inbound_at=now())

    def sink(self, sink: ReplySink, context: ChannelContext) -> ReplySink:
        if self.connection is None:
            return sink
        return MaskedSink.of(NotedSink(sink, context, self.connection), self.connection, context)

"""Relay tickets: each ConversationRelay socket is bound to the one call Twilio announced.

A signed voice webhook (``/voice``, or ``/voice/relay-ended`` going back to the agent) issues a ticket:
a random, single-use token kept in Redis for ``SWITCHBOARD_TWILIO_RELAY_TICKET_TTL_S`` with the call's
``CallSid`` and ``From`` as that signed webhook gave them, and the caller's language when an earlier relay
session of the call detected it (kept with the call, ``remember_language``: a call going back to the agent
goes on in it). The token travels in the
``<ConversationRelay url>`` query; Twilio signs the whole URL, query included, on the socket's upgrade.
The upgrade consumes the ticket (one atomic read-and-delete), so a captured URL or signature opens
nothing on another call, a second time, or after a restart. Only a hash of the token is stored.
"""

from __future__ import annotations

import hashlib
import secrets
from urllib.parse import urlencode

from pydantic import BaseModel, ConfigDict

from gateway.channel import ChannelContext

__all__ = ["TICKET_PARAM", "RelayTicket", "RelayTickets", "issue_relay_url", "relay_url", "remember_language",
           "remembered_language"]

RELAY_PATH = "/channels/twilio/relay"
TICKET_PARAM = "ticket"
CALL_TTL_S = 4 * 3600  # what is kept of a call outlasts any call


class RelayTicket(BaseModel):
    """What the signed webhook said about the call a relay socket may serve."""

    model_config = ConfigDict(frozen=True)

    call_sid: str
    caller: str
    connection_id: str | None = None  # a console-added number's connection; None: the environment's number
    language: str | None = None  # the caller's, detected earlier in the call; None: not known yet


def relay_url(public_url: str, path: str = RELAY_PATH) -> str:
    """The socket's address as Twilio is told it (and signs it): wss:// for https, ws:// for http."""
    base = public_url.rstrip("/")
    scheme, _, rest = base.partition("://")
    return f"{'wss' if scheme == 'https' else 'ws'}://{rest}{path}"


class RelayTickets:
    def __init__(self, context: ChannelContext) -> None:
        self.store = context.store
        self.ttl_s = context.settings.twilio_relay_ticket_ttl_s

    def _key(self, token: str) -> str:
        return self.store.key("relay", "ticket", hashlib.sha256(token.encode()).hexdigest())

    async def issue(self, ticket: RelayTicket) -> str:
        token = secrets.token_urlsafe(32)
        await self.store.redis.set(self._key(token), ticket.model_dump_json(), px=max(1, int(self.ttl_s * 1000)))
        return token

    async def consume(self, token: str) -> RelayTicket | None:
        """The ticket, removed in the same step (a transaction: GET and DEL, any Redis version); None when
        unknown, expired or already used."""
        if not token or len(token) > 128:
            return None
        async with self.store.redis.pipeline(transaction=True) as pipe:
            raw, _ = await pipe.get(self._key(token)).delete(self._key(token)).execute()
        return RelayTicket.model_validate_json(raw) if raw else None


async def issue_relay_url(context: ChannelContext, call_sid: str, caller: str, *, connection_id: str | None = None,
                          path: str = RELAY_PATH, language: str | None = None) -> str:
    """The ``<ConversationRelay url>`` for one call, from any signed voice webhook: the socket's address
    (``path`` under ``SWITCHBOARD_PUBLIC_URL``) with a fresh single-use ticket for this call and caller."""
    token = await RelayTickets(context).issue(RelayTicket(call_sid=call_sid, caller=caller,
                                                          connection_id=connection_id, language=language))
    return f"{relay_url(context.settings.public_url, path)}?{urlencode({TICKET_PARAM: token})}"


def _language_key(context: ChannelContext, call_sid: str, connection_id: str | None) -> str:
    return context.store.key("relay", "language", *((connection_id,) if connection_id else ()), call_sid)


async def remember_language(context: ChannelContext, ticket: RelayTicket, code: str) -> None:
    """The caller of ``ticket``'s call speaks ``code``: a later relay session of the call starts in it."""
    await context.store.redis.set(_language_key(context, ticket.call_sid, ticket.connection_id), code,
                                  ex=CALL_TTL_S)


async def remembered_language(context: ChannelContext, call_sid: str, connection_id: str | None) -> str | None:
    """The language an earlier relay session of the call detected; None when none did."""
    raw = await context.store.redis.get(_language_key(context, call_sid, connection_id))
    return raw.decode() if raw is not None else None

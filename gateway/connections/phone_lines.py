"""One business number, one set of customers: a number's SMS and voice connections share their callers.

The environment's number keys a customer as ``phone:+E164`` on SMS and on calls alike, so the agent
remembers a text on the phone. A number added in the console as a ``twilio_sms`` and a ``twilio_voice``
connection is two connections, each scoping its customers by its id (``scoped``); for them to be one
customer, both scope by the same id: the number's *line*, the oldest connection of either kind with that
account and number when the line is first asked for. It is kept in Redis (``phone_line:<digest>``,
claimed with ``SET NX``, so replicas agree) and never moves, so an SMS connection that already had
customers keeps them when its number's voice connection is added, and a line outlives its connections.
"""

from __future__ import annotations

import hashlib
import re

from gateway.connections.model import Connection

__all__ = ["PHONE_KINDS", "line_digest"]

PHONE_KINDS = frozenset({"twilio_sms", "twilio_voice"})
_NOT_DIGITS = re.compile(r"[^\d+]")


def line_digest(connection: Connection) -> str | None:
    """The number's line (its account and number, hashed: an account SID is a credential); None for a
    connection that is not a phone number's."""
    if connection.kind not in PHONE_KINDS:
        return None
    number = _NOT_DIGITS.sub("", connection.secret("phone_number"))
    account = connection.secret("account_sid")
    return hashlib.sha256(f"{account}|{number}".encode()).hexdigest()[:32]

"""How a channel checks a connection's credentials with its vendor: the extension point channels fill."""

from __future__ import annotations

from typing import Protocol

from gateway.connections.model import Connection
from gateway.core.errors import InvalidInput, SwitchboardError

__all__ = ["ConnectionVerifier", "CredentialsRefused", "VendorUnreachable"]


class CredentialsRefused(InvalidInput):
    """The vendor answered and refused the credentials (a 422: nothing is stored)."""


class VendorUnreachable(SwitchboardError):
    """The vendor could not be asked (network, 5xx): the connection is saved disabled with this error."""


class ConnectionVerifier(Protocol):
    """One kind's vendor check, registered by its channel module.

    ``verify`` asks the vendor who the credentials belong to and points the vendor's webhook at
    ``webhook_url`` where the kind needs it (Telegram); it answers what the vendor calls the account
    (a bot's ``@username``), raises ``CredentialsRefused`` or ``VendorUnreachable``. ``forget``
    undoes the vendor side when the connection is deleted (best effort)."""

    async def verify(self, connection: Connection, webhook_url: str) -> str | None: ...

    async def forget(self, connection: Connection) -> None: ...

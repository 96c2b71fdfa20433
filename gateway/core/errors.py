"""The gateway's error tree. The root, ``SwitchboardError``, lives in ``rag_core`` (the bottom layer)
so every package shares it.

These are domain errors: they say what went wrong, not how to answer it. The HTTP layer
(``gateway.http.errors``) maps each kind to a status and the ``error`` of its JSON body; an error
raised in a background job is never an HTTP error.
"""

from __future__ import annotations

from rag_core.errors import SwitchboardError

__all__ = [
    "BadRequest", "ChannelDeliveryError", "Conflict", "Forbidden", "GatewayError", "InvalidInput", "LLMError",
    "NotFound", "PayloadTooLarge", "ServiceUnavailable", "SwitchboardError", "TurnLockTimeout", "Unauthorized",
]


class GatewayError(SwitchboardError):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(GatewayError):
    """The request cannot be read (not JSON, invalid Unicode, a malformed frame)."""


class InvalidInput(GatewayError):
    """The request was read but a value in it is refused."""


class PayloadTooLarge(GatewayError):
    """A body or value over its size limit."""


class UnsupportedMediaType(GatewayError):
    """A file of a type the gateway does not read; the message names the supported ones."""


class Unauthorized(GatewayError):
    """No credentials, or wrong ones."""


class Forbidden(GatewayError):
    """Credentials are fine but this is not allowed (or the feature is switched off)."""


class RateLimited(GatewayError):
    """Too many requests from this caller; ``retry_after_s`` says when the next one is allowed."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class NotFound(GatewayError):
    """No such thing."""


class Conflict(GatewayError):
    """The request repeats one already handled, or clashes with what exists."""


class ServiceUnavailable(GatewayError):
    """Something the gateway depends on does not answer."""


class LLMError(GatewayError):
    """The language model failed (timeout, HTTP error, refusal); the turn answers with the fallback."""


class TurnLockTimeout(GatewayError):
    """The conversation's earlier turns did not finish in time."""


class TurnFenced(GatewayError):
    """This consumer lost the turn's inbox entry to another (it stalled past the reclaim time)."""


class ChannelDeliveryError(GatewayError):
    """A channel could not deliver a reply after its retries."""

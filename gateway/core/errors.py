"""The gateway's error tree. The root lives in ``rag_core`` (the bottom layer) so every package shares it.

Each error carries the HTTP status and the short ``kind`` the API puts in its JSON error body.
"""

from __future__ import annotations

from rag_core.errors import SwitchboardError


class GatewayError(SwitchboardError):
    status = 500
    kind = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(GatewayError):
    status = 400
    kind = "bad_request"


class InvalidInput(GatewayError):
    status = 422
    kind = "invalid_input"


class PayloadTooLarge(GatewayError):
    status = 413
    kind = "payload_too_large"


class Unauthorized(GatewayError):
    status = 401
    kind = "unauthorized"


class Forbidden(GatewayError):
    status = 403
    kind = "forbidden"


class NotFound(GatewayError):
    status = 404
    kind = "not_found"


class Conflict(GatewayError):
    status = 409
    kind = "conflict"


class ServiceUnavailable(GatewayError):
    status = 503
    kind = "unavailable"


class LLMError(GatewayError):
    """The language model failed (timeout, HTTP error, refusal); the turn answers with the fallback."""

    status = 502
    kind = "llm_error"


class TurnLockTimeout(GatewayError):
    status = 503
    kind = "busy"


class ChannelDeliveryError(GatewayError):
    """A channel could not deliver a reply after its retries."""

    status = 502
    kind = "delivery_failed"

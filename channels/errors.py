"""Outbound failures, translated from each vendor's exceptions at the adapter boundary."""

from __future__ import annotations

from gateway.channel import ChannelDeliveryError

__all__ = ["ChannelRateLimited", "ChannelRejected", "ChannelUnavailable"]


class ChannelRateLimited(ChannelDeliveryError):
    """429: the vendor asked us to wait ``retry_after_s`` (``None`` when it did not say)."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ChannelUnavailable(ChannelDeliveryError):
    """5xx or a network error: worth another try."""


class ChannelRejected(ChannelDeliveryError):
    """The vendor refused the request for good (bad chat id, blocked bot, opted-out number)."""

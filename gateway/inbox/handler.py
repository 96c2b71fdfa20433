"""How a channel hands its queued deliveries back to the inbox's turn consumers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gateway.core.errors import SwitchboardError
from gateway.inbox.delivery import Delivery
from gateway.turn.pipeline import Turn
from gateway.turn.ports import ReplySink

__all__ = ["DeliveryRejected", "InboxHandler", "SendWork", "TurnWork", "Work"]


@dataclass(frozen=True)
class TurnWork:
    """An accepted turn and where its reply goes."""

    turn: Turn
    sink: ReplySink


@dataclass(frozen=True)
class SendWork:
    """A channel's own send outside a turn (a welcome, a canned answer)."""

    send: Callable[[], Awaitable[None]]
    what: str


Work = TurnWork | SendWork


class DeliveryRejected(SwitchboardError):
    """A queued delivery that can never be processed (its payload is not what the vendor sends)."""


@runtime_checkable
class InboxHandler(Protocol):
    """A channel whose webhook queues deliveries in the inbox; turn consumers hand each one back.

    ``accept`` runs in the delivery's chat order: it parses the payload, persists the user message
    (``TurnPipeline.accept``) or decides on a canned answer, and returns what to run next — or
    ``None`` when there is nothing to answer. ``sink_for`` rebuilds the reply target when a turn
    accepted by a consumer that went away is resumed. ``DeliveryRejected`` parks the delivery.
    """

    name: str

    async def accept(self, delivery: Delivery) -> Work | None: ...

    def sink_for(self, delivery: Delivery) -> ReplySink: ...

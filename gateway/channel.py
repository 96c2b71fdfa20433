"""The contract between the gateway and a channel adapter (the adapters live in ``channels/``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from fastapi import APIRouter

    from gateway.inbox.stream import Delivery
    from gateway.turn.pipeline import Turn


Markup = Literal["plain", "html", "mrkdwn", "markdown"]


@dataclass(frozen=True)
class Capabilities:
    """What a channel can show; the reply renderer adapts to it."""

    max_length: int
    markup: Markup = "plain"
    streaming: bool = False
    typing: bool = False
    edit: bool = False
    voice: bool = False


@dataclass(frozen=True)
class DeliveryReport:
    delivered: bool
    parts: int = 1
    external_ids: tuple[str, ...] = ()
    error: str | None = None


@runtime_checkable
class ReplySink(Protocol):
    """Where a turn's reply goes. ``delta`` is called only when the channel streams."""

    streaming: bool

    async def delta(self, text: str) -> None: ...

    async def deliver(self, text: str) -> DeliveryReport: ...


@runtime_checkable
class ChannelAdapter(Protocol):
    """One vendor: verifies and parses its webhooks into ``InboundMessage``s, renders and sends replies.

    Adapters are built from ``Services`` by a factory listed in ``channels.registry``; the gateway
    mounts each ``router()`` and calls ``start``/``stop`` with the app's lifespan.
    """

    name: str
    capabilities: Capabilities

    def router(self) -> APIRouter: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


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


class DeliveryRejected(Exception):
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

"""The contract between the gateway and a channel adapter (the adapters live in ``channels/``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from fastapi import APIRouter


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

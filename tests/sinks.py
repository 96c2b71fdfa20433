"""A reply sink for tests that run turns in process: it records what a channel would have sent."""

from __future__ import annotations

from gateway.turn.ports import DeliveryReport


class RecordingSink:
    streaming = False
    channel = "test"

    def __init__(self, sent: list[str] | None = None) -> None:
        self.sent = sent if sent is not None else []

    async def delta(self, text: str) -> None:
        pass

    async def deliver(self, text: str) -> DeliveryReport:
        self.sent.append(text)
        return DeliveryReport(delivered=True)

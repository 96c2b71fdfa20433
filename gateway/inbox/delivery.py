"""One acknowledged vendor delivery, as the webhook stored it in the inbox stream."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["Delivery"]


@dataclass(frozen=True)
class Delivery:
    """One acknowledged vendor delivery, as the webhook stored it."""

    id: str  # the stream entry id
    channel: str
    dedup_id: str
    order_key: str
    ticket: int
    body: str
    attempts: int = 1

    def json(self) -> Any:
        return json.loads(self.body)

    def fields(self) -> dict[str, str | int]:
        """The stream entry, as ``_PUSH`` writes it."""
        return {"c": self.channel, "d": self.dedup_id, "k": self.order_key, "t": self.ticket, "b": self.body}

    @classmethod
    def from_entry(cls, entry_id: bytes | str, fields: dict, attempts: int = 1) -> Delivery:
        def text(name: bytes) -> str:
            return fields[name].decode()

        return cls(
            id=entry_id.decode() if isinstance(entry_id, bytes) else entry_id,
            channel=text(b"c"),
            dedup_id=text(b"d"),
            order_key=text(b"k"),
            ticket=int(fields[b"t"]),
            body=text(b"b"),
            attempts=attempts,
        )

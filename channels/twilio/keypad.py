"""Keys a relay caller presses (ConversationRelay ``dtmf`` messages, one per key) as one turn's text.

Keys pressed within ``window_s`` of each other are one entry: "4", "4", "1" become ``[pressed 4 4 1]``,
which the model reads like anything the caller said (a menu in the business instructions, "press 1 for
opening hours", maps it). An entry is at most ``MAX_KEYS`` keys; one more starts the next entry.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from contextlib import suppress

__all__ = ["KEYS", "MAX_KEYS", "Keypad", "is_pressed", "pressed"]

KEYS = frozenset("0123456789*#")
_PRESSED = re.compile(r"\[pressed [0-9*#](?: [0-9*#])*\]")
MAX_KEYS = 24


def pressed(keys: str) -> str:
    """``"441"`` as the turn's text: ``[pressed 4 4 1]``."""
    return f"[pressed {' '.join(keys)}]"


def is_pressed(text: str) -> bool:
    """Whether ``text`` is keys the caller pressed (``pressed``'s text), not words they said."""
    return _PRESSED.fullmatch(text) is not None


class Keypad:
    """Collects one call's keys; ``entered`` gets each entry's text once the caller stops pressing."""

    def __init__(self, window_s: float, entered: Callable[[str], Awaitable[None]]) -> None:
        self.window_s = window_s
        self.entered = entered
        self.keys = ""
        self.timer: asyncio.Task | None = None

    async def press(self, key: str) -> bool:
        """One key; False (and nothing kept) for anything but a phone key."""
        if len(key) != 1 or key not in KEYS:
            return False
        if len(self.keys) >= MAX_KEYS:
            await self.flush()
        self.keys += key
        if self.timer is not None:
            self.timer.cancel()
        self.timer = asyncio.ensure_future(self._after_window())
        return True

    async def _after_window(self) -> None:
        await asyncio.sleep(self.window_s)
        self.timer = None  # this task is the one running: flush must not cancel it
        await self.flush()

    async def flush(self) -> None:
        """The keys so far as one entry, now."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        keys, self.keys = self.keys, ""
        if keys:
            await self.entered(pressed(keys))

    async def close(self) -> None:
        """The call ended: keys still waiting for their window are dropped."""
        if self.timer is not None:
            self.timer.cancel()
            with suppress(asyncio.CancelledError):
                await self.timer
            self.timer = None
        self.keys = ""

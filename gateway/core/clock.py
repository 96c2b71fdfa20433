"""The time source of live context (calendar, data ages, expiries, timer slots).

Injected by constructor so calendars, expiries and timer periods can be tested at any instant.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class Clock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock(Clock):
    """A clock that stays where it is set (or advances with real time from there when ``running``)."""

    def __init__(self, at: datetime, *, running: bool = False) -> None:
        self._at = at
        self._set_real = datetime.now(UTC)
        self.running = running

    def set(self, at: datetime) -> None:
        self._at = at
        self._set_real = datetime.now(UTC)

    def advance(self, delta: timedelta) -> None:
        self.set(self.now() + delta)

    def now(self) -> datetime:
        if self.running:
            return self._at + (datetime.now(UTC) - self._set_real)
        return self._at


def describe_age(then: datetime, now: datetime) -> str:
    """``just now``, ``5 minutes ago``, ``3 hours ago``, ``2 days ago``."""
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        if seconds >= size and (unit != "second" or seconds >= 10):
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''} ago"
    return "just now"

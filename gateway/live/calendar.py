"""The 45-day calendar the agent schedules with, in the project's time zone.

One line per day from today: ``today Monday 24th of February 2026``, ``tomorrow …``, then weekday +
date; business hours and closed dates are marked on the days they apply. Stored in
``project_attributes_private_dynamic_prompt_calendar`` and rebuilt just after local midnight.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gateway.conversation.attributes import AttributeSpec, CustomerAttributes
from gateway.core.clock import Clock

DAYS = 45
REBUILD_AFTER_MIDNIGHT = timedelta(seconds=30)
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_RANGE = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-4]):([0-5]\d)$")


def _check_timezone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not an IANA time zone name (e.g. Europe/Berlin)") from None
    return name


def _check_hours(hours: dict[str, str]) -> dict[str, str]:
    """Keys are weekdays (``mon`` … ``sun`` or full names); values ``closed`` or ``09:00-12:00,13:00-17:00``."""
    normalized: dict[str, str] = {}
    for key, value in hours.items():
        day = key.strip().lower()[:3]
        if day not in WEEKDAYS:
            raise ValueError(f"{key!r} is not a weekday (use mon, tue, ... sun)")
        spans = [s.strip() for s in value.split(",")]
        if value.strip().lower() != "closed":
            for span in spans:
                m = _RANGE.match(span)
                if m is None or (m[3], m[4]) <= (m[1], m[2]):
                    raise ValueError(f"{key}: {span!r} is not an opening span like 09:00-17:00")
        normalized[day] = "closed" if value.strip().lower() == "closed" else ",".join(spans)
    return normalized


TIMEZONE = AttributeSpec("project_attributes_setting_timezone", str, "UTC", "IANA time zone of the business",
                  check=_check_timezone)
BUSINESS_HOURS = AttributeSpec("project_attributes_setting_business_hours", dict[str, str], {},
                  "opening hours per weekday, e.g. {\"mon\": \"09:00-17:00\", \"sun\": \"closed\"}",
                  check=_check_hours)
CLOSED_DATES = AttributeSpec("project_attributes_setting_closed_dates", dict[date, str], {},
                  "dates the business is closed, with an optional reason")
CALENDAR = AttributeSpec("project_attributes_private_dynamic_prompt_calendar", str, "",
                  "the 45-day calendar injected into the prompt", private=True)


def ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def day_label(day: date) -> str:
    return f"{day.strftime('%A')} {ordinal(day.day)} of {day.strftime('%B')} {day.year}"


def _hours_note(day: date, hours: dict[str, str], closed: dict[date, str]) -> str:
    if day in closed:
        return f": closed ({closed[day]})" if closed[day] else ": closed"
    if not hours:
        return ""
    spans = hours.get(WEEKDAYS[day.weekday()], "closed")
    return ": closed" if spans == "closed" else f": open {spans.replace(',', ', ')}"


def build_calendar(
    today: date,
    days: int = DAYS,
    hours: dict[str, str] | None = None,
    closed: dict[date, str] | None = None,
) -> str:
    hours, closed = hours or {}, closed or {}
    lines = []
    for offset in range(days):
        day = today + timedelta(days=offset)
        prefix = "today " if offset == 0 else "tomorrow " if offset == 1 else ""
        lines.append(prefix + day_label(day) + _hours_note(day, hours, closed))
    return "\n".join(lines)


class CalendarService:
    def __init__(self, attributes: CustomerAttributes, clock: Clock) -> None:
        self.attributes = attributes
        self.clock = clock

    async def zone(self) -> ZoneInfo:
        return ZoneInfo(await self.attributes.get(TIMEZONE.name))

    async def today(self) -> date:
        return self.clock.now().astimezone(await self.zone()).date()

    async def rebuild(self) -> str:
        values = await self.attributes.all()
        today = self.clock.now().astimezone(ZoneInfo(values[TIMEZONE.name])).date()
        closed = CLOSED_DATES.validate(values[CLOSED_DATES.name])
        text = build_calendar(today, hours=values[BUSINESS_HOURS.name], closed=closed)
        await self.attributes.set(CALENDAR.name, text)
        return text

    async def current(self, values: dict[str, Any] | None = None) -> str:
        """The stored calendar when it starts today; rebuilt now if a timer was missed. ``values``: the
        customer attributes when the caller has just read them."""
        if values is None:
            values = await self.attributes.all()  # one read: the stored calendar and its time zone
        today = self.clock.now().astimezone(ZoneInfo(values[TIMEZONE.name])).date()
        stored = values[CALENDAR.name]
        if stored.startswith(f"today {day_label(today)}"):
            return stored
        return await self.rebuild()

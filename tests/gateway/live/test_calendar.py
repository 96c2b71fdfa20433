"""The 45-day calendar: golden text across month ends, leap days and DST; its timer slots."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from gateway.live.calendar import CALENDAR, build_calendar, ordinal
from gateway.live.context import CALENDAR as CALENDAR_TIMER


@pytest.mark.parametrize(
    ("day", "text"),
    [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"), (13, "13th"),
     (21, "21st"), (22, "22nd"), (23, "23rd"), (24, "24th"), (30, "30th"), (31, "31st")],
)
def test_ordinals(day, text):
    assert ordinal(day) == text


def test_golden_calendar_across_a_month_end():
    lines = build_calendar(date(2026, 2, 24)).splitlines()
    assert len(lines) == 45
    assert lines[:7] == [
        "today Tuesday 24th of February 2026",
        "tomorrow Wednesday 25th of February 2026",
        "Thursday 26th of February 2026",
        "Friday 27th of February 2026",
        "Saturday 28th of February 2026",
        "Sunday 1st of March 2026",
        "Monday 2nd of March 2026",
    ]
    assert lines[-1] == "Thursday 9th of April 2026"
    assert "Tuesday 31st of March 2026" in lines and "Monday 23rd of March 2026" in lines


def test_golden_calendar_over_a_leap_day():
    lines = build_calendar(date(2028, 2, 27), days=5).splitlines()
    assert lines == [
        "today Sunday 27th of February 2028",
        "tomorrow Monday 28th of February 2028",
        "Tuesday 29th of February 2028",
        "Wednesday 1st of March 2028",
        "Thursday 2nd of March 2028",
    ]


def test_year_end_and_business_hours_and_closed_dates_are_marked():
    hours = {"mon": "09:00-17:00", "tue": "09:00-12:00,13:00-17:00", "sat": "10:00-14:00", "sun": "closed"}
    closed = {date(2026, 12, 25): "Christmas Day", date(2026, 12, 28): ""}
    lines = build_calendar(date(2026, 12, 24), days=10, hours=hours, closed=closed).splitlines()
    assert lines == [
        "today Thursday 24th of December 2026: closed",
        "tomorrow Friday 25th of December 2026: closed (Christmas Day)",
        "Saturday 26th of December 2026: open 10:00-14:00",
        "Sunday 27th of December 2026: closed",
        "Monday 28th of December 2026: closed",
        "Tuesday 29th of December 2026: open 09:00-12:00, 13:00-17:00",
        "Wednesday 30th of December 2026: closed",
        "Thursday 31st of December 2026: closed",
        "Friday 1st of January 2027: closed",
        "Saturday 2nd of January 2027: open 10:00-14:00",
    ]


async def test_today_follows_the_project_time_zone_across_dst(services, clock):
    attrs = services.customer_attributes
    await attrs.set("project_attributes_setting_timezone", "Europe/Berlin")
    # 23:30 UTC on Saturday 28 March is already 00:30 on Sunday 29 March in Berlin (CET, UTC+1).
    clock.set(datetime(2026, 3, 28, 23, 30, tzinfo=UTC))
    text = await services.live.calendar.rebuild()
    assert text.splitlines()[:3] == [
        "today Sunday 29th of March 2026",
        "tomorrow Monday 30th of March 2026",
        "Tuesday 31st of March 2026",
    ]
    assert await attrs.get(CALENDAR.name) == text
    # The rebuild slot for the next day fires 30 s after local midnight, now CEST (UTC+2).
    slot = await services.live.timers.timers[CALENDAR_TIMER].following(clock.now())
    assert (slot.id, slot.at.astimezone(UTC)) == ("d2026-03-30", datetime(2026, 3, 29, 22, 0, 30, tzinfo=UTC))


async def test_calendar_rebuilds_on_the_day_change_and_after_a_missed_timer(services, clock):
    calendar = services.live.calendar
    clock.set(datetime(2026, 2, 28, 23, 59, tzinfo=UTC))
    assert (await calendar.current()).startswith("today Saturday 28th of February 2026\n")
    clock.set(datetime(2026, 3, 1, 0, 1, tzinfo=UTC))
    # The stored calendar starts yesterday: current() notices and rebuilds instead of serving it.
    assert (await calendar.current()).startswith("today Sunday 1st of March 2026\ntomorrow Monday 2nd")


async def test_calendar_timer_tick_rebuilds_once_and_schedules_the_next_midnight(services, clock):
    timers = services.live.timers
    await services.customer_attributes.set("project_attributes_setting_timezone", "America/New_York")
    # 2026-03-08 is the US DST change (02:00 EST -> 03:00 EDT).
    clock.set(datetime(2026, 3, 8, 5, 0, 30, tzinfo=UTC))  # 00:00:30 EST
    assert await timers.tick(CALENDAR_TIMER, "d2026-03-08") == "fired d2026-03-08"
    assert (await services.customer_attributes.get(CALENDAR.name)).startswith("today Sunday 8th of March 2026")
    assert await timers.tick(CALENDAR_TIMER, "d2026-03-08") == "slot d2026-03-08 already fired"
    assert await timers.tick(CALENDAR_TIMER, "d2026-03-07") == "stale slot d2026-03-07 (now d2026-03-08)"
    assert "d2026-03-09" in await timers.scheduled(CALENDAR_TIMER)
    scheduled = services.queues["timers"].scheduled_job_registry.get_scheduled_time(
        timers.job_id(CALENDAR_TIMER, "d2026-03-09"))
    assert scheduled == datetime(2026, 3, 9, 4, 0, 30, tzinfo=UTC)  # midnight EDT is 04:00 UTC


async def test_changing_business_hours_through_the_api_rebuilds_the_calendar(admin, live_gateway):
    resp = admin.put("/api/attributes/project_attributes_setting_business_hours",
                     json={"value": {"Monday": "08:00-12:00", "tuesday": "closed"}})
    assert resp.status_code == 200, resp.text
    assert resp.json()["value"] == {"mon": "08:00-12:00", "tue": "closed"}
    calendar = admin.get("/api/attributes/project_attributes_private_dynamic_prompt_calendar").json()["value"]
    # The manual clock stands at Tuesday 24 February 2026, 09:00 UTC.
    assert calendar.splitlines()[:2] == [
        "today Tuesday 24th of February 2026: closed",
        "tomorrow Wednesday 25th of February 2026: closed",
    ]
    assert "Monday 2nd of March 2026: open 08:00-12:00" in calendar.splitlines()

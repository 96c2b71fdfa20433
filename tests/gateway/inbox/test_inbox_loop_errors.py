"""A consumer whose Redis calls fail keeps trying without hammering Redis or flooding the log: each
failure is counted in ``switchboard_inbox_loop_errors_total``, the tries back off, the traceback is
logged once, and after Redis recovers the deliveries are answered and the backoff starts over."""

from __future__ import annotations

import asyncio
import logging

import pytest

from gateway.inbox.consumer import Backoff, InboxConsumer
from gateway.services import Services
from tests.gateway.inbox.test_inbox import RecordingChannel, push, until


@pytest.fixture
async def services(settings):
    built = Services.build(settings.model_copy(update={"inbox_reclaim_s": 0.3}), consume_inbox=False)
    yield built
    await built.aclose()


def loop_errors(services: Services, step: str) -> float:
    value = services.metrics.registry.get_sample_value("switchboard_inbox_loop_errors_total", {"step": step})
    return value or 0.0


async def break_the_stream(services: Services) -> None:
    """Every XREADGROUP and XAUTOCLAIM on the inbox now fails (WRONGTYPE)."""
    await services.redis.delete(services.inbox.stream)
    await services.redis.set(services.inbox.stream, "not a stream")


def consumer_errors(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "gateway.inbox.consumer" and r.levelno >= logging.ERROR]


def test_the_backoff_doubles_up_to_its_cap():
    backoff = Backoff(first_s=0.5, max_s=30.0)
    assert [backoff.delay(n) for n in range(1, 9)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert backoff.delay(10**6) == 30.0  # a week-long outage does not overflow


async def test_a_failing_read_is_counted_backs_off_logs_once_and_recovers(services, caplog):
    caplog.set_level(logging.WARNING, logger="gateway.inbox.consumer")
    channel = RecordingChannel()
    live = InboxConsumer(services.inbox, services.turns, services.settings, services.metrics,
                         handlers={"test": channel}, backoff=Backoff(first_s=0.05, max_s=1.0))
    await live.start()
    try:
        await break_the_stream(services)
        await until(lambda: loop_errors(services, "read") >= 1, what="the first failed read")
        first = loop_errors(services, "read")
        await asyncio.sleep(2.0)
        # retries after 0.05, 0.1, 0.2, 0.4, 0.8 s: about five in two seconds, not one per poll
        assert 3 <= loop_errors(services, "read") - first <= 6
        assert loop_errors(services, "reclaim") >= 1
        errors = consumer_errors(caplog)
        assert sorted(r.getMessage() for r in errors) == ["inbox read failed; retrying with backoff",
                                                          "inbox reclaim failed; retrying with backoff"]
        assert all(r.exc_info and "WRONGTYPE" in str(r.exc_info[1]) for r in errors)

        await services.redis.delete(services.inbox.stream)  # Redis is back
        await services.inbox.ensure_group()
        await push(services, 21)
        await until(lambda: channel.sent == [21], what="the delivery to be answered after the recovery")
        assert any("inbox read works again" in r.getMessage() for r in caplog.records)

        # A new failure starts the backoff over (0.05, 0.1, 0.2 s) instead of waiting the 1 s it had reached.
        before = loop_errors(services, "read")
        await break_the_stream(services)
        await until(lambda: loop_errors(services, "read") > before, what="the next failed read")
        first = loop_errors(services, "read")
        await asyncio.sleep(0.5)
        assert loop_errors(services, "read") - first >= 2
    finally:
        await services.redis.delete(services.inbox.stream)
        await live.stop()
    assert len(consumer_errors(caplog)) == 2  # the same error again within a minute: counted, not logged

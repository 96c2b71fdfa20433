"""Inbox in a real Chromium: a dead letter shows its reason; "Retry" queues it again."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from playwright.sync_api import expect
from redis.asyncio import Redis

from gateway.conversation.store import RedisStore
from gateway.inbox.stream import Inbox
from tests.admin_ui.conftest import PASSWORD, console  # noqa: F401  (the console fixture)


def _dead_letter(redis_url: str, agent_id: str) -> None:
    """A Telegram delivery parked by a consumer, as the inbox parks one it cannot process."""

    async def park() -> None:
        redis = Redis.from_url(redis_url)
        inbox = Inbox(redis, RedisStore(redis, agent_id))
        await inbox.ensure_group()
        await inbox.push("telegram", "update-77", "chat-42", '{"update_id": 77}')
        [delivery] = await inbox.read("test-consumer", 1, block_ms=100)
        await inbox.dead_letter(delivery, "not a Telegram Update: 1 validation error(s)")
        await redis.aclose()

    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API owns this thread's event loop
        pool.submit(asyncio.run, park()).result()


def test_retry_a_dead_letter(console, page):  # noqa: F811
    settings = console.services.settings
    _dead_letter(settings.redis_url, settings.agent_id)
    page.goto(f"{console.url}/admin/inbox")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{console.url}/admin/inbox")
    expect(page.get_by_role("row", name="Dead letters")).to_contain_text("1")
    expect(page.get_by_text("not a Telegram Update: 1 validation error(s)")).to_be_visible()
    page.get_by_role("button", name="Retry").click()
    expect(page.get_by_role("status")).to_contain_text("requeued")
    expect(page.get_by_role("row", name="Dead letters")).to_contain_text("0")
    expect(page.get_by_role("row", name="Waiting or in flight")).to_contain_text("1")  # back in the inbox

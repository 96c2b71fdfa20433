"""Inbox in a real Chromium: a dead letter shows its reason; "Retry" queues it again."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

from playwright.sync_api import expect
from redis.asyncio import Redis

from gateway.conversation.store import RedisStore
from gateway.inbox.stream import Inbox
from tests.admin_ui.conftest import PASSWORD, quiet_console  # noqa: F401  (the console fixture)


def _taken_delivery(console, update_id: int, then) -> None:  # noqa: F811
    """A Telegram delivery queued and taken by a consumer; ``then(inbox, delivery)`` is what became of it."""
    settings = console.services.settings

    async def take() -> None:
        redis = Redis.from_url(settings.redis_url)
        inbox = Inbox(redis, RedisStore(redis, settings.agent_id))
        await inbox.ensure_group()
        await inbox.push("telegram", f"update-{update_id}", f"chat-{update_id}", f'{{"update_id": {update_id}}}')
        [delivery] = await inbox.read("test-consumer", 1, block_ms=100)
        await then(inbox, delivery)
        await redis.aclose()

    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API owns this thread's event loop
        pool.submit(asyncio.run, take()).result()


def _open_inbox(console, page) -> None:  # noqa: F811
    page.goto(f"{console.url}/admin/inbox")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{console.url}/admin/inbox")


def test_retry_a_dead_letter(quiet_console, page):  # noqa: F811
    console = quiet_console
    # parked by a consumer, as the inbox parks one it cannot process
    _taken_delivery(console, 77, lambda inbox, d: inbox.dead_letter(d, "not a Telegram Update: 1 validation error(s)"))
    _open_inbox(console, page)
    expect(page.get_by_role("row", name="Dead letters")).to_contain_text("1")
    expect(page.get_by_text("not a Telegram Update: 1 validation error(s)")).to_be_visible()
    page.get_by_role("button", name="Retry").click()
    expect(page.get_by_role("status")).to_contain_text("requeued")
    expect(page.get_by_role("row", name="Dead letters")).to_contain_text("0")
    expect(page.get_by_role("row", name="Waiting or in flight")).to_contain_text("1")  # back in the inbox


def test_a_waiting_delivery_says_why_and_when_it_is_tried_next(quiet_console, page):  # noqa: F811
    console = quiet_console
    # Telegram did not take its reply: it waits, as the consumer records it
    _taken_delivery(console, 78, lambda inbox, d: inbox.retries.wait(
        d, None, "ReplyNotSent", "telegram sendMessage: TelegramServerError: Bad Gateway (gave up after 4 tries)",
        next_try_at=time.time() + 120, resend="We open at nine."))
    _open_inbox(console, page)
    row = page.get_by_role("region", name="Waiting to be tried again").get_by_role("row", name="update-78")
    expect(row).to_contain_text("its reply to be sent")
    expect(row).to_contain_text("ReplyNotSent: telegram sendMessage: TelegramServerError: Bad Gateway")
    expect(row).to_contain_text("in 1")  # next try in about 120 s
    expect(row).not_to_contain_text("We open at nine.")  # the reply itself is not shown

"""The inbox and its turn consumers on a real Redis: dedup, per-chat order across consumers, a dead
consumer's deliveries resumed, retries, dead letters, and a graceful stop that hands work back."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from gateway.inbox.consumer import InboxConsumer
from gateway.inbox.handler import DeliveryRejected, SendWork
from gateway.inbox.stream import Delivery
from gateway.services import Services
from tests.redis_servers import embedded_redis, redis_url  # noqa: F401 - fixtures: both servers


class RecordingChannel:
    """A test channel: records the order deliveries are accepted in and the sends that ran."""

    name = "test"

    def __init__(self, *, fail_first: int = 0, reject: bool = False, send_s: float = 0.0) -> None:
        self.fail_first = fail_first
        self.reject = reject
        self.send_s = send_s
        self.accepted: list[tuple[str, int]] = []
        self.sent: list[int] = []
        self.attempts: list[int] = []

    async def accept(self, delivery: Delivery) -> SendWork:
        self.attempts.append(delivery.attempts)
        if self.fail_first:
            self.fail_first -= 1
            raise ConnectionError("redis blip")
        if self.reject:
            raise DeliveryRejected("not a test payload")
        body = delivery.json()
        await asyncio.sleep(body.get("slow", 0))
        self.accepted.append((body["chat"], body["n"]))

        async def send() -> None:
            await asyncio.sleep(self.send_s)
            self.sent.append(body["n"])

        return SendWork(send, what=f"test send {body['n']}")

    def sink_for(self, delivery: Delivery):
        raise AssertionError("only turns are resumed from a sink")


@pytest.fixture
async def services(settings):
    built = Services.build(settings.model_copy(update={"inbox_reclaim_s": 0.3}), consume_inbox=False)
    yield built
    await built.aclose()


def consumer(services: Services, channel: RecordingChannel, **overrides) -> InboxConsumer:
    settings = services.settings.model_copy(update=overrides)
    return InboxConsumer(services.inbox, services.turns, settings, services.metrics, handlers={"test": channel})


async def push(services: Services, n: int, chat: str = "chat-a", **extra) -> bool:
    return await services.inbox.push("test", f"d{n}", chat, json.dumps({"n": n, "chat": chat, **extra}))


async def until(check, timeout_s: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def stream_length(services: Services) -> int:
    return int(await services.redis.xlen(services.inbox.stream))


async def test_a_redelivered_id_is_queued_once(services):
    assert await push(services, 1) is True
    assert await push(services, 1) is False
    assert await push(services, 2) is True
    entries = await services.redis.xrange(services.inbox.stream)
    assert [Delivery.from_entry(i, f).ticket for i, f in entries] == [1, 2]


async def test_each_chat_is_accepted_in_arrival_order_across_two_consumers(services):
    channel = RecordingChannel()
    first, second = consumer(services, channel), consumer(services, channel)
    await first.start()
    await second.start()
    try:
        # the first message of chat-a is slow to accept; its successors must wait for it
        await push(services, 0, slow=0.3)
        for n in range(1, 6):
            await push(services, n)
            await push(services, 100 + n, chat="chat-b")
        await until(lambda: len(channel.sent) == 11, what="every delivery to be sent")
    finally:
        await first.stop()
        await second.stop()
    assert [n for chat, n in channel.accepted if chat == "chat-a"] == [0, 1, 2, 3, 4, 5]
    assert [n for chat, n in channel.accepted if chat == "chat-b"] == [101, 102, 103, 104, 105]
    assert await stream_length(services) == 0


async def test_a_dead_consumers_delivery_is_resumed_by_another(services):
    channel = RecordingChannel()
    await push(services, 7)
    await services.inbox.ensure_group()
    [taken] = await services.inbox.read("crashed-consumer", 10, 100)  # read, then never finished
    live = consumer(services, channel)
    await live.start()
    try:
        await until(lambda: channel.sent == [7], what="the abandoned delivery to be resumed")
    finally:
        await live.stop()
    assert taken.dedup_id == "d7" and channel.attempts == [2]
    assert services.metrics.inbox_reclaimed.labels("test")._value.get() == 1
    assert await stream_length(services) == 0


async def test_a_failed_accept_is_retried_and_answered_once(services):
    channel = RecordingChannel(fail_first=1)
    live = consumer(services, channel)
    await live.start()
    try:
        await push(services, 3)
        await until(lambda: channel.sent == [3], what="the retry to succeed")
    finally:
        await live.stop()
    assert channel.attempts == [1, 2]
    assert await services.inbox.dead_letters() == []


async def test_a_chat_waits_in_order_while_its_earlier_delivery_waits_to_be_retried(services):
    channel = RecordingChannel(fail_first=1)  # the first accept fails (the vendor or Redis away)
    live = consumer(services, channel)
    await push(services, 1)
    await push(services, 2)  # the same chat, right behind it
    await live.start()
    try:
        await until(lambda: len(channel.sent) == 2, what="both deliveries to be sent")
    finally:
        await live.stop()
    assert channel.accepted == [("chat-a", 1), ("chat-a", 2)] and channel.sent == [1, 2]
    assert await services.inbox.dead_letters() == [] and await services.inbox.retries.all() == []


async def test_a_waiting_record_left_behind_does_not_hold_its_chat(services):
    await push(services, 1)
    await services.inbox.ensure_group()
    [first] = await services.inbox.read("gone-consumer", 1, 100)
    await services.inbox.order.pass_ticket(first.order_key, first.ticket)  # it was accepted, in its turn
    await services.inbox.retries.wait(first, None, "ReplyNotSent", "telegram sendMessage: 502")
    await services.inbox.done(first)  # acknowledged, but its consumer died before clearing the record
    channel = RecordingChannel()
    live = consumer(services, channel)
    await push(services, 2)
    await live.start()
    try:
        await until(lambda: channel.sent == [2], what="the chat's next delivery")
    finally:
        await live.stop()
    assert channel.attempts == [1] and await services.inbox.retries.all() == []


async def test_a_delivery_that_keeps_failing_is_dead_lettered_with_its_reason(services):
    channel = RecordingChannel(fail_first=99)
    live = consumer(services, channel, inbox_retry_window_s=0.4, inbox_retry_first_s=0.05, inbox_retry_max_s=0.1)
    await live.start()
    try:
        await push(services, 4)
        started = time.monotonic()
        await until(lambda: services.metrics.inbox_dead.labels("test")._value.get() == 1, what="the dead letter")
    finally:
        await live.stop()
    assert time.monotonic() - started >= 0.4  # tried again and again over the whole retry window
    [dead] = await services.inbox.dead_letters()
    assert dead["error"].startswith("still failing after 0.4 s (SWITCHBOARD_INBOX_RETRY_WINDOW_S)")
    assert dead["error"].endswith("ConnectionError: redis blip") and int(dead["attempts"]) >= 4
    assert len(channel.attempts) >= 4 and await services.inbox.retries.all() == []
    assert json.loads(dead["b"]) == {"n": 4, "chat": "chat-a"}
    assert channel.sent == [] and await stream_length(services) == 0


async def test_an_unreadable_delivery_is_dead_lettered_at_once(services):
    channel = RecordingChannel(reject=True)
    live = consumer(services, channel)
    await live.start()
    try:
        await push(services, 5)
        await services.inbox.push("nochannel", "x1", "k", "{}")
        await until(lambda: services.metrics.inbox_dead.labels("test")._value.get() == 1
                    and services.metrics.inbox_dead.labels("nochannel")._value.get() == 1, what="dead letters")
    finally:
        await live.stop()
    errors = {d["c"]: d["error"] for d in await services.inbox.dead_letters()}
    assert errors == {"test": "not a test payload",
                      "nochannel": "no 'nochannel' channel is configured in this process"}
    assert channel.attempts == [1]
    stats = await services.inbox.stats()
    assert (stats.length, stats.pending, stats.dead) == (0, 0, 2)


async def test_a_stopping_consumer_hands_unfinished_work_back_at_once(services):
    slow = RecordingChannel(send_s=10)
    leaving = consumer(services, slow, turn_drain_timeout_s=0.2, inbox_reclaim_s=60)
    await leaving.start()
    await push(services, 9)
    await until(lambda: slow.accepted == [("chat-a", 9)], what="the first consumer to take it")
    await leaving.stop()
    assert slow.sent == []

    fast = RecordingChannel()
    taking_over = consumer(services, fast, inbox_reclaim_s=60)  # no waiting for the reclaim timeout
    await taking_over.start()
    try:
        await until(lambda: fast.sent == [9], timeout_s=3, what="the next consumer to finish it")
    finally:
        await taking_over.stop()
    assert await stream_length(services) == 0


async def test_operators_see_dead_letters_and_can_queue_one_again(services):
    import httpx

    from gateway.http.app import create_app

    await push(services, 11)
    await services.inbox.ensure_group()
    [delivery] = await services.inbox.read("c1", 10, 100)
    await services.inbox.dead_letter(delivery, "ValueError: the cause an operator fixed")
    app = create_app(services.settings, services=services)
    headers = {"Authorization": "Bearer admin-secret"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://gw") as client:
        assert (await client.get("/api/inbox")).status_code == 401
        state = (await client.get("/api/inbox", headers=headers)).json()
        assert (state["length"], state["pending"], state["dead"]) == (0, 0, 1)
        [dead] = state["dead_letters"]
        assert dead["error"] == "ValueError: the cause an operator fixed" and dead["d"] == "d11"
        missing = await client.post("/api/inbox/dead/0-1/retry", headers=headers)
        assert missing.status_code == 404 and "no dead letter" in missing.json()["message"]
        assert (await client.post(f"/api/inbox/dead/{dead['id']}/retry", headers=headers)).json() == {
            "requeued": dead["id"]
        }
        state = (await client.get("/api/inbox", headers=headers)).json()
    assert (state["length"], state["dead"]) == (1, 0)

    channel = RecordingChannel()
    live = consumer(services, channel)
    await live.start()
    try:
        await until(lambda: channel.sent == [11], what="the requeued delivery to be answered")
    finally:
        await live.stop()


async def test_a_draining_consumer_keeps_its_turns_from_being_taken_over(services):
    slow = RecordingChannel(send_s=1.0)
    draining = consumer(services, slow, turn_drain_timeout_s=3)
    other_channel = RecordingChannel()
    other = consumer(services, other_channel)  # reclaims anything idle for 0.3 s
    await draining.start()
    await push(services, 12)
    await until(lambda: slow.accepted == [("chat-a", 12)], what="the first consumer to take it")
    await other.start()
    try:
        await draining.stop()  # waits for the 1 s send while the other consumer keeps looking
        await asyncio.sleep(0.5)
    finally:
        await other.stop()
    assert slow.sent == [12] and other_channel.accepted == []
    assert await stream_length(services) == 0


async def test_a_consumer_never_runs_its_own_stalled_delivery_twice(services):
    class Stalling(RecordingChannel):
        async def accept(self, delivery):
            work = await super().accept(delivery)

            async def send() -> None:
                time.sleep(0.7)  # noqa: ASYNC251 - on purpose: a blocking call stalls the loop past the reclaim time
                await asyncio.sleep(0.5)  # the read loop's next reclaim runs while the turn goes on
                self.sent.append(delivery.json()["n"])

            return SendWork(send, what=work.what)

    channel = Stalling()
    live = consumer(services, channel)
    await live.start()
    try:
        await push(services, 13)
        await until(lambda: channel.sent == [13], what="the send")
        await asyncio.sleep(0.5)
    finally:
        await live.stop()
    assert channel.accepted == [("chat-a", 13)] and channel.sent == [13]
    assert services.metrics.inbox_reclaimed.labels("test")._value.get() == 0


async def test_reclaim_skips_an_entry_deleted_while_pending_and_takes_the_rest(services):
    # Redis 6.2 answers XAUTOCLAIM with [cursor, claimed] and a deleted entry as nil; 7 adds the deleted ids.
    await push(services, 14)
    await push(services, 15)
    await services.inbox.ensure_group()
    gone, kept = await services.inbox.read("crashed-consumer", 10, 100)
    await services.redis.xdel(services.inbox.stream, gone.id)  # trimmed by hand while its consumer was away
    await asyncio.sleep(0.05)
    reclaimed, cursor = await services.inbox.reclaim("next-consumer", 10, 10)
    assert [(d.id, d.dedup_id, d.attempts) for d in reclaimed] == [(kept.id, "d15", 2)]
    assert cursor == "0-0"  # the pending list was scanned to its end


async def test_a_delivery_due_again_while_its_last_attempt_winds_up_is_tried_at_once(services):
    """d2 waits behind d1 (failed, due again at once). d2 is parked inside the chat's order lock, due at
    once, while its attempt still releases that lock: its retry must follow that attempt, not be skipped
    until a reclaim (30 s here)."""
    channel = RecordingChannel(fail_first=1)
    live = consumer(services, channel, inbox_retry_first_s=0.0, inbox_reclaim_s=30)
    await push(services, 1)
    await push(services, 2)
    await live.start()
    try:
        await until(lambda: sorted(channel.sent) == [1, 2], timeout_s=5, what="both deliveries sent")
        assert channel.accepted == [("chat-a", 1), ("chat-a", 2)]  # in the chat's order
    finally:
        await live.stop()


async def test_a_delivery_that_makes_no_progress_is_logged_once_with_where_it_waits(services, caplog):
    vendor_answers = asyncio.Event()

    async def waiting_for_the_vendor() -> None:
        await vendor_answers.wait()

    class Hanging(RecordingChannel):
        async def accept(self, delivery):
            work = await super().accept(delivery)

            async def send() -> None:
                await waiting_for_the_vendor()
                self.sent.append(delivery.json()["n"])

            return SendWork(send, what=work.what)

    channel = Hanging()
    live = consumer(services, channel, inbox_stuck_warn_s=0.3)  # the keep-alive looks every 0.1 s
    await live.start()
    try:
        with caplog.at_level("WARNING", logger="gateway.inbox.consumer"):
            await push(services, 14)
            await until(lambda: channel.accepted == [("chat-a", 14)], what="the delivery to be taken")
            await asyncio.sleep(1.0)  # past the threshold, and several keep-alives later
            vendor_answers.set()
            await until(lambda: channel.sent == [14], what="the send to finish")
    finally:
        await live.stop()
    stuck = [r.getMessage() for r in caplog.records if "without finishing" in r.getMessage()]
    assert len(stuck) == 1, stuck
    assert stuck[0].startswith("test delivery d14 (attempt 1) has run for ")
    where = stuck[0].split("it waits in: ")[1].split(" → ")
    assert where[0].startswith("InboxConsumer._consume (consumer.py:")
    assert [w.split(" (")[0].rsplit(".", 1)[-1] for w in where[-3:-1]] == ["waiting_for_the_vendor", "wait"]

"""Posting the queued events of each webhook endpoint, oldest first, one at a time.

One task per endpoint, on whichever replica holds the endpoint's lease (a Redis key renewed as it
works), so two replicas never post the same event. The oldest event of the endpoint's stream is posted
until the receiver answers 2xx, waiting ``SWITCHBOARD_WEBHOOK_BACKOFF_FIRST_S`` after the first failure,
twice as long after each next one, at most ``..._BACKOFF_MAX_S``; an event still undelivered
``..._RETRY_WINDOW_S`` after it happened is given up (logged as ``expired``). Only then does the next
event go, so a conversation's events arrive in the order they happened and none is lost to a receiver
that is down. Every attempt is logged (the newest ``..._LOG_SIZE``)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable

import httpx
from redis.asyncio import Redis

from gateway.core.outbound import OutboundPolicy, shown
from gateway.core.outbound_client import GuardedTransport
from gateway.core.settings import Settings
from gateway.insight.signature import HEADER, sign
from gateway.insight.webhooks import Endpoint, Webhooks
from gateway.jobs.lease import Lease, stopping

__all__ = ["WebhookDelivery"]

log = logging.getLogger(__name__)

ANSWER_MAX_BYTES = 64 * 1024
LEASE_S = 30


class WebhookDelivery:
    def __init__(self, settings: Settings, webhooks: Webhooks, policy: OutboundPolicy, listen_url: str,
                 also_follow: dict[str, Callable[[], Awaitable[None]]] | None = None) -> None:
        self.settings = settings
        self.listen_url = listen_url  # a connection of its own for the change channels
        # channel -> reload: other insight settings kept in memory and announced the same way (the price edits)
        self.reloads = {webhooks.changes_channel: webhooks.reload, **(also_follow or {})}
        self.webhooks = webhooks
        self.redis = webhooks.store.redis
        self.policy = policy
        self.token = uuid.uuid4().hex
        self._tasks: dict[str, tuple[Endpoint, asyncio.Task]] = {}
        self._supervisor: asyncio.Task | None = None
        self._client: httpx.AsyncClient | None = None

    async def start(self) -> None:
        self._client = httpx.AsyncClient(transport=GuardedTransport(self.policy, ANSWER_MAX_BYTES),
                                         timeout=self.settings.webhook_timeout_s, follow_redirects=False)
        self.webhooks.on_reload.append(self._align)
        try:
            for reload in self.reloads.values():
                await reload()
        except Exception as exc:  # Redis down at start: /readyz says so; the follower reloads once subscribed
            log.warning("webhooks: could not read the endpoints at start: %s", exc)
        self._supervisor = asyncio.create_task(self._follow_changes(), name="insight-changes")

    async def stop(self) -> None:
        tasks = [t for _, t in self._tasks.values()] + ([self._supervisor] if self._supervisor else [])
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        if self._client is not None:
            await self._client.aclose()

    async def _follow_changes(self) -> None:
        """Reload the endpoints (and the price edits) when any replica changes them (a Redis channel), and after
        each (re)subscription. An idle subscription sends nothing, so a gateway without webhooks pays nothing."""
        while True:
            listener = Redis.from_url(self.listen_url, socket_connect_timeout=5)
            pubsub = listener.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(*self.reloads)
                for reload in self.reloads.values():  # whatever changed while not subscribed
                    await reload()
                while True:
                    stopping()
                    message = await pubsub.get_message(timeout=1.0)
                    if message is not None:
                        await self.reloads[message["channel"].decode()]()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("webhooks: following changes failed (%s); again in 1 s", exc)
                await asyncio.sleep(1.0)
            finally:
                await pubsub.aclose()
                await listener.aclose()

    def _align(self, endpoints: dict[str, Endpoint]) -> None:
        """One delivery task per enabled endpoint, restarted when the endpoint changes."""
        for endpoint_id, (known, task) in list(self._tasks.items()):
            now = endpoints.get(endpoint_id)
            if now is None or not now.enabled or now.updated_at != known.updated_at or task.done():
                task.cancel()
                del self._tasks[endpoint_id]
        for endpoint in endpoints.values():
            if endpoint.enabled and endpoint.id not in self._tasks:
                task = asyncio.create_task(self._deliver_all(endpoint), name=f"webhook-{endpoint.id}")
                self._tasks[endpoint.id] = (endpoint, task)

    async def _deliver_all(self, endpoint: Endpoint) -> None:
        stream = self.webhooks.stream_key(endpoint.id)
        lease = Lease(self.redis, self.webhooks.store.key("webhooks", "lease", endpoint.id), ttl_s=LEASE_S,
                      token=self.token)
        failures = 0
        while True:
            stopping()  # a cancellation a Redis command swallowed
            try:
                if not await lease.take():
                    await asyncio.sleep(LEASE_S / 3)
                    continue
                head = await self.redis.xrange(stream, count=1)
                if not head:
                    await self.redis.xread({stream: "0-0"}, count=1, block=1000)
                    continue
                entry_id, fields = head[0]
                delivered = await self._attempt(endpoint, stream, entry_id.decode(), fields[b"event"], failures + 1)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("webhook %s: delivery loop error", endpoint.id)
                delivered = False
            if delivered:
                failures = 0
                continue
            failures += 1
            first, most = self.settings.webhook_backoff_first_s, self.settings.webhook_backoff_max_s
            await asyncio.sleep(min(most, first * 2 ** (failures - 1)))

    async def _attempt(self, endpoint: Endpoint, stream: str, entry_id: str, raw: bytes, attempt: int) -> bool:
        """Post one event; True when it left the queue (delivered, or past the retry window)."""
        event = json.loads(raw)
        happened_ms = int(entry_id.split("-")[0])
        record = {"event_id": event["id"], "type": event["type"], "conversation_id": event.get("conversation_id"),
                  "attempt": attempt, "at": time.time()}
        if time.time() * 1000 - happened_ms > self.settings.webhook_retry_window_s * 1000:
            await self._done(endpoint, stream, entry_id, {**record, "status": "expired",
                                                           "error": "undelivered within the retry window"})
            log.warning("webhook %s: event %s given up after the retry window", endpoint.id, event["id"])
            return True
        assert self._client is not None
        started = time.perf_counter()
        headers = {"Content-Type": "application/json", "User-Agent": "Switchboard-Webhooks/1",
                   "X-Switchboard-Event": event["type"], "X-Switchboard-Event-Id": event["id"],
                   HEADER: sign(self.webhooks.secret_of(endpoint), raw)}
        try:
            answer = await self._client.post(endpoint.url, content=raw, headers=headers)
            status, error = answer.status_code, None if answer.is_success else f"HTTP {answer.status_code}"
        except httpx.HTTPError as exc:
            status, error = None, f"{type(exc).__name__}: {exc}"[:300]
        record |= {"http_status": status, "ms": round((time.perf_counter() - started) * 1000, 1)}
        if error is None:
            await self._done(endpoint, stream, entry_id, {**record, "status": "delivered"})
            return True
        await self._log(endpoint, {**record, "status": "failed", "error": error})
        log.info("webhook %s: %s to %s failed (%s), attempt %d", endpoint.id, event["type"], shown(endpoint.url),
                 error, attempt)
        return False

    async def _done(self, endpoint: Endpoint, stream: str, entry_id: str, record: dict) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.xdel(stream, entry_id)
        self._log_into(pipe, endpoint, record)
        await pipe.execute()

    async def _log(self, endpoint: Endpoint, record: dict) -> None:
        pipe = self.redis.pipeline(transaction=False)
        self._log_into(pipe, endpoint, record)
        await pipe.execute()

    def _log_into(self, pipe, endpoint: Endpoint, record: dict) -> None:
        key = self.webhooks.log_key(endpoint.id)
        pipe.lpush(key, json.dumps(record))
        pipe.ltrim(key, 0, self.settings.webhook_log_size - 1)

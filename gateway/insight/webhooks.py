"""Event webhooks (issue 41): the operator's endpoints and the events they take, and the queueing of an
event for each endpoint that takes it.

An event is queued as one ``XADD`` on the endpoint's Redis stream, inside a pipeline the caller sends
anyway (a turn's closing round trip, a vote's, a conversation's end): emitting costs no round trip, and
nothing at all while no endpoint takes the event. Which endpoints take what is read from a copy in
memory, reloaded when any replica changes them (a Redis channel tells the others).
``WebhookDelivery`` posts each stream's events in order."""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable
from datetime import datetime
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from gateway.conversation.store import RedisStore
from gateway.core.errors import InvalidInput, NotFound
from gateway.core.models import new_id, utcnow
from gateway.core.outbound import OutboundPolicy, shown

__all__ = ["EVENT_TYPES", "Endpoint", "EndpointIn", "EndpointPatch", "Sealer", "Webhooks", "masked"]

log = logging.getLogger(__name__)

EventType = Literal["conversation.handoff_requested", "message.feedback", "conversation.resolved",
                    "conversation.unanswered", "tool.failed"]
EVENT_TYPES: tuple[str, ...] = EventType.__args__  # type: ignore[attr-defined]
MAX_ENDPOINTS = 50


class Sealer(Protocol):
    """Encrypts a secret at rest (the connections' ``CredentialBox``)."""

    def seal(self, credentials: dict[str, str]) -> str: ...

    def open(self, sealed: str) -> dict[str, str]: ...


class EndpointIn(BaseModel):
    url: str = Field(max_length=2000)
    events: list[EventType] = Field(min_length=1)
    secret: str | None = Field(None, min_length=16, max_length=200)
    description: str = Field("", max_length=200)
    enabled: bool = True


class EndpointPatch(BaseModel):
    url: str | None = Field(None, max_length=2000)
    events: list[EventType] | None = Field(None, min_length=1)
    secret: str | None = Field(None, min_length=16, max_length=200)
    description: str | None = Field(None, max_length=200)
    enabled: bool | None = None


class Endpoint(BaseModel):
    id: str
    url: str
    events: list[str]
    description: str = ""
    enabled: bool = True
    sealed_secret: str
    created_at: datetime
    updated_at: datetime

    def shown(self, secret: str) -> dict:
        """The endpoint as the API answers: the secret masked (``shown_secret`` a fresh one, once)."""
        return {"id": self.id, "url": shown(self.url), "events": self.events, "description": self.description,
                "enabled": self.enabled, "secret": masked(secret), "created_at": self.created_at.isoformat(),
                "updated_at": self.updated_at.isoformat()}


def masked(secret: str) -> str:
    return f"{secret[:6]}…{secret[-4:]}" if len(secret) > 12 else "…"


class Webhooks:
    def __init__(self, store: RedisStore, box: Sealer | None, policy: OutboundPolicy) -> None:
        self.store = store
        self.box = box
        self.policy = policy
        self.endpoints: dict[str, Endpoint] = {}  # the copy emitting reads; reloaded by ``reload``
        self._by_event: dict[str, list[str]] = {}
        self.on_reload: list[Callable[[dict[str, Endpoint]], None]] = []  # the delivery tasks follow changes

    # -- keys --------------------------------------------------------------------------------------
    @property
    def endpoints_key(self) -> str:
        return self.store.key("webhooks", "endpoints")

    def stream_key(self, endpoint_id: str) -> str:
        return self.store.key("webhooks", "queue", endpoint_id)

    @property
    def changes_channel(self) -> str:
        return self.store.key("webhooks", "changed")

    def log_key(self, endpoint_id: str) -> str:
        return self.store.key("webhooks", "log", endpoint_id)

    # -- the endpoints -----------------------------------------------------------------------------
    async def reload(self) -> dict[str, Endpoint]:
        raw = await self.store.redis.hgetall(self.endpoints_key)
        endpoints = {}
        for value in raw.values():
            try:
                endpoint = Endpoint.model_validate_json(value)
            except ValueError:
                log.error("webhooks: an unreadable endpoint record is ignored")
                continue
            endpoints[endpoint.id] = endpoint
        self._use(endpoints)
        return endpoints

    def _use(self, endpoints: dict[str, Endpoint]) -> None:
        by_event: dict[str, list[str]] = {}
        for endpoint in sorted(endpoints.values(), key=lambda e: e.created_at):
            if endpoint.enabled:
                for event in endpoint.events:
                    by_event.setdefault(event, []).append(endpoint.id)
        self.endpoints, self._by_event = endpoints, by_event
        for hook in self.on_reload:
            hook(endpoints)

    def secret_of(self, endpoint: Endpoint) -> str:
        if self.box is None:
            raise InvalidInput("webhook secrets need SWITCHBOARD_SECRET_KEY")
        return self.box.open(endpoint.sealed_secret)["secret"]

    def _seal(self, secret: str) -> str:
        if self.box is None:
            raise InvalidInput("webhooks: no key to encrypt their secrets with")
        try:
            return self.box.seal({"secret": secret})
        except InvalidInput as exc:  # no key configured
            raise InvalidInput("webhooks: set SWITCHBOARD_SECRET_KEY first (secrets are stored encrypted)") from exc

    async def _checked_url(self, url: str) -> str:
        url = url.strip()
        await self.policy.check(url)  # the outbound guard, now and again before every delivery
        return url

    async def _changed(self) -> None:
        await self.reload()
        await self.store.redis.publish(self.changes_channel, "1")

    async def get(self, endpoint_id: str) -> Endpoint:
        raw = await self.store.redis.hget(self.endpoints_key, endpoint_id)
        if raw is None:
            raise NotFound(f"no webhook {endpoint_id}")
        return Endpoint.model_validate_json(raw)

    async def create(self, spec: EndpointIn) -> tuple[Endpoint, str, bool]:
        """The new endpoint, its secret and whether that secret was made here (then shown once)."""
        if await self.store.redis.hlen(self.endpoints_key) >= MAX_ENDPOINTS:
            raise InvalidInput(f"at most {MAX_ENDPOINTS} webhooks")
        url = await self._checked_url(spec.url)
        secret = spec.secret or "whsec_" + secrets.token_urlsafe(24)
        now = utcnow()
        endpoint = Endpoint(id=new_id(), url=url, events=list(dict.fromkeys(spec.events)),
                            description=spec.description, enabled=spec.enabled, sealed_secret=self._seal(secret),
                            created_at=now, updated_at=now)
        await self.store.redis.hset(self.endpoints_key, endpoint.id, endpoint.model_dump_json())
        await self._changed()
        log.info("webhook %s created for %s (%s)", endpoint.id, shown(url), ", ".join(endpoint.events))
        return endpoint, secret, spec.secret is None

    async def update(self, endpoint_id: str, patch: EndpointPatch) -> Endpoint:
        endpoint = await self.get(endpoint_id)
        changes = patch.model_dump(exclude_unset=True, exclude_none=True)
        if "url" in changes:
            changes["url"] = await self._checked_url(changes["url"])
        if "events" in changes:
            changes["events"] = list(dict.fromkeys(changes["events"]))
        if "secret" in changes:
            changes["sealed_secret"] = self._seal(changes.pop("secret"))
        endpoint = endpoint.model_copy(update={**changes, "updated_at": utcnow()})
        await self.store.redis.hset(self.endpoints_key, endpoint.id, endpoint.model_dump_json())
        await self._changed()
        return endpoint

    async def delete(self, endpoint_id: str) -> None:
        """The endpoint, its queue (undelivered events) and its log go."""
        pipe = self.store.redis.pipeline(transaction=True)
        pipe.hdel(self.endpoints_key, endpoint_id)
        pipe.delete(self.stream_key(endpoint_id), self.log_key(endpoint_id))
        removed, _ = await pipe.execute()
        if not removed:
            raise NotFound(f"no webhook {endpoint_id}")
        await self._changed()
        log.info("webhook %s deleted", endpoint_id)

    async def deliveries(self, endpoint_id: str, limit: int = 100) -> dict:
        """The newest delivery attempts (newest first) and how many events wait."""
        await self.get(endpoint_id)
        pipe = self.store.redis.pipeline(transaction=False)
        pipe.lrange(self.log_key(endpoint_id), 0, limit - 1)
        pipe.xlen(self.stream_key(endpoint_id))
        attempts, waiting = await pipe.execute()
        return {"waiting": waiting, "attempts": [json.loads(a) for a in attempts]}

    # -- emitting ----------------------------------------------------------------------------------
    def takes(self, event_type: str) -> bool:
        return bool(self._by_event.get(event_type))

    def emit_into(self, pipe, event_type: str, conversation_id: str | None, data: dict,
                  agent: str | None = None) -> None:
        """Queue the event for every endpoint that takes it, in ``pipe`` (no round trip of its own)."""
        targets = self._by_event.get(event_type)
        if not targets:
            return
        event = json.dumps({"id": new_id(), "type": event_type, "created_at": utcnow().isoformat(),
                            "agent": agent or None, "conversation_id": conversation_id, "data": data})
        for endpoint_id in targets:
            pipe.xadd(self.stream_key(endpoint_id), {"event": event})

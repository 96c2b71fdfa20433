"""Channel connections added at run time: their webhook routes, inbox dispatch and vendor checks.

Each kind's connection handler lives in a vendor module (``CONNECTION_MODULES``) imported on first
use, so a deployment without connections never pays for aiogram's import. A webhook names its
connection in the path; the connection is read from Redis on every call (an operator's change is
seen by every replica at once) and a disabled or deleted one answers 404 before anything is queued.
Deliveries go into the inbox under the kind's channel name with the connection in their id, so one
inbox handler per kind serves both the environment-configured channel and every connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from importlib import import_module
from typing import Protocol

from fastapi import Request, Response, WebSocket
from starlette.routing import BaseRoute, Route, WebSocketRoute

from channels import webhook_docs
from channels.connection_capabilities import CAPABILITIES, relay_capabilities
from channels.masking import MaskedSink, masked_work, vendor_boundary
from gateway.channel import (
    Capabilities,
    ChannelContext,
    Connection,
    Delivery,
    DeliveryRejected,
    DeliveryReport,
    InboxHandler,
    MessageTemplate,
    NotFound,
    ReplySink,
    Work,
    split_delivery_id,
)

__all__ = ["CONNECTION_MODULES", "CONNECTION_SOCKETS", "ConnectionKind", "NotedRatedSink", "NotedSink",
           "install_connections", "persona_scope"]

log = logging.getLogger(__name__)

# kind -> (the module with its ``build_connections(context)``, the inbox channel name, its webhook paths)
CONNECTION_MODULES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "telegram": ("channels.telegram.connection", "telegram", ("/channels/telegram/{connection_id}/webhook",)),
    "slack": ("channels.slack.connection", "slack", ("/channels/slack/{connection_id}/events",)),
    "twilio_sms": ("channels.twilio.connection", "twilio_sms", ("/channels/twilio/{connection_id}/sms",)),
    "whatsapp": ("channels.twilio.whatsapp", "whatsapp", ("/channels/whatsapp/{connection_id}",
                                                   "/channels/whatsapp/{connection_id}/status")),
    "twilio_voice": ("channels.twilio.voice_connection", "twilio_voice", (
        "/channels/twilio/{connection_id}/voice", "/channels/twilio/{connection_id}/voice/turn",
        "/channels/twilio/{connection_id}/voice/status", "/channels/twilio/{connection_id}/voice/relay-ended",
        "/channels/twilio/{connection_id}/voice/whisper")),
    "whatsapp_cloud": ("channels.meta.whatsapp", "whatsapp_cloud", ("/channels/meta/{connection_id}/whatsapp",)),
    "messenger": ("channels.meta.messenger", "messenger", ("/channels/meta/{connection_id}/messenger",)),
    "instagram": ("channels.meta.instagram", "instagram", ("/channels/meta/{connection_id}/instagram",)),
    "teams": ("channels.teams.connection", "teams", ("/channels/teams/{connection_id}/messages",)),
}
# kind -> its WebSocket paths: a voice connection's ConversationRelay calls (their channel is ``twilio_relay``)
CONNECTION_SOCKETS: dict[str, tuple[str, ...]] = {"twilio_voice": ("/channels/twilio/{connection_id}/relay",)}
# kinds whose vendor checks the webhook URL with a GET before posting to it (Meta's hub.challenge)
CHECKED_BY_GET = frozenset({"whatsapp_cloud", "messenger", "instagram"})


ENVIRONMENT_NOTE_EVERY_S = 60.0


class KindHandler(Protocol):
    """One kind's connection side, built by its vendor module's ``build_connections(context)``."""

    capabilities: Capabilities

    async def webhook(self, request: Request, connection: Connection) -> Response: ...

    async def socket(self, ws: WebSocket, connection: Connection) -> None:
        """A socket of the kind's (``CONNECTION_SOCKETS``); only kinds that have them define it."""

    async def accept(self, delivery: Delivery, connection: Connection) -> Work | None: ...

    def sink_for(self, delivery: Delivery, connection: Connection) -> ReplySink: ...

    async def verify(self, connection: Connection, webhook_url: str) -> str | None: ...

    async def forget(self, connection: Connection) -> None: ...

    async def stop(self) -> None: ...


def now() -> datetime:
    return datetime.now(UTC)


async def note_delivery(context: ChannelContext, connection: Connection, report: DeliveryReport) -> DeliveryReport:
    """A connection's reply outcome goes into its status: the time it went out, or why it did not."""
    if context.connections is not None:
        if report.delivered:
            await context.connections.note(connection.id, last_outbound_at=now())
        else:
            await context.connections.note_error(connection, report.error or "the reply was not delivered")
    return report


class NotedRatedSink:
    """Mixed in before a vendor's rating sink (Telegram, Slack): a connection's replies, with or without the
    rating buttons, each noted in the connection's status once (``note_delivery``)."""

    context: ChannelContext
    connection: Connection
    buttons: bool

    async def deliver(self, text: str) -> DeliveryReport:
        return await note_delivery(self.context, self.connection, await super().deliver(text))  # type: ignore[misc]

    async def deliver_rated(self, text: str, message_id: str) -> DeliveryReport:
        if not self.buttons:  # the vendor sink would call ``deliver``, noted there
            return await self.deliver(text)
        report = await super().deliver_rated(text, message_id)  # type: ignore[misc]
        return await note_delivery(self.context, self.connection, report)


async def persona_scope(context: ChannelContext, connection: Connection) -> str:
    """What the connection's customers are scoped by (a phone number's SMS and calls share it)."""
    store = context.connections
    return connection.id if store is None else await store.persona_scope(connection)


class NotedSink:
    """A connection's reply sink whose outcome goes into its status (``note_delivery``); for a sink with
    ``delta`` and ``deliver`` only (its other attributes, a call's ``interrupted`` and ``heard``, are the
    inner sink's)."""

    def __init__(self, inner: ReplySink, context: ChannelContext, connection: Connection) -> None:
        self._inner, self._context, self._connection = inner, context, connection
        self.streaming = inner.streaming

    async def delta(self, text: str) -> None:
        await self._inner.delta(text)

    async def deliver(self, text: str) -> DeliveryReport:
        return await note_delivery(self._context, self._connection, await self._inner.deliver(text))

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


class ConnectionKind:
    """One kind: its vendor module loaded on first use, its routes, its inbox dispatch and vendor check."""

    def __init__(self, kind: str, context: ChannelContext) -> None:
        self.kind = kind
        self.module, self.name, self.paths = CONNECTION_MODULES[kind]
        self.context = context
        self.environment: InboxHandler | None = None  # the environment-configured channel of this name
        self._handler: KindHandler | None = None
        self._loading = asyncio.Lock()
        self._environment_noted_at = float("-inf")  # loop time of this process's last last_inbound_at write

    async def handler(self) -> KindHandler:
        if self._handler is None:
            async with self._loading:
                if self._handler is None:
                    module = await asyncio.to_thread(import_module, self.module)
                    self._handler = module.build_connections(self.context)
                    self.context.on_stop.append(self._handler.stop)
        return self._handler

    async def connection(self, connection_id: str) -> Connection:
        store = self.context.connections
        found = None if store is None else await store.find(connection_id)
        if found is None or found.kind != self.kind or not found.enabled:
            self.context.metrics.rejected.labels(self.name, "no_connection").inc()
            raise NotFound("no such connection, or it is disabled")
        return found

    # -- the webhook ---------------------------------------------------------------------------
    async def webhook(self, request: Request) -> Response:
        connection = await self.connection(request.path_params["connection_id"])
        handler = await self.handler()
        async with vendor_boundary(connection):
            return await handler.webhook(request, connection)

    async def socket(self, ws: WebSocket) -> None:
        """A connection's socket; its upgrade refused (403) for a connection deleted, disabled or unknown."""
        try:
            connection = await self.connection(ws.path_params["connection_id"])
        except NotFound:
            await ws.close(code=1008)
            return
        handler = await self.handler()
        async with vendor_boundary(connection):
            await handler.socket(ws, connection)

    def routes(self) -> list[BaseRoute]:
        methods = ["GET", "POST"] if self.kind in CHECKED_BY_GET else ["POST"]
        webhooks: list[BaseRoute] = [Route(path, self.webhook, methods=methods, include_in_schema=False)
                                     for path in self.paths]
        return webhooks + [WebSocketRoute(path, self.socket) for path in CONNECTION_SOCKETS.get(self.kind, ())]

    def described(self) -> dict[str, dict]:
        """Each webhook path and what the OpenAPI document says the vendor sends there."""
        return {path: webhook_docs.for_connection(getattr(webhook_docs, DOCS[path]))
                for path in self.paths if path in DOCS}

    # -- the inbox -----------------------------------------------------------------------------
    async def accept(self, delivery: Delivery) -> Work | None:
        connection_id, _ = split_delivery_id(delivery.dedup_id)
        if connection_id is None:
            if self.environment is None:
                raise DeliveryRejected(f"no {self.name!r} channel is configured by environment variables")
            await self._note_environment_inbound()
            environment = self.context.environment_connections.get(self.kind)
            if environment is None:  # pragma: no cover - a configured channel has its credentials
                return await self.environment.accept(delivery)
            async with vendor_boundary(environment):
                work = await self.environment.accept(delivery)
            return masked_work(work, environment, self.context)
        store = self.context.connections
        connection = None if store is None else await store.find(connection_id)
        if connection is None or not connection.enabled:
            log.info("%s delivery %s: its connection was disabled or deleted; not answered", self.name,
                     delivery.dedup_id)
            return None
        await store.note(connection.id, last_inbound_at=now())
        handler = await self.handler()
        async with vendor_boundary(connection):
            work = await handler.accept(delivery, connection)
        return masked_work(work, connection, self.context)

    async def _note_environment_inbound(self) -> None:
        """The environment channel's ``last_inbound_at``, written at most once a minute per process: a
        round trip on every turn would cost more than a minute's precision on the Channels screen is worth."""
        loop_now = asyncio.get_running_loop().time()
        if self.context.connections is None or loop_now - self._environment_noted_at < ENVIRONMENT_NOTE_EVERY_S:
            return
        self._environment_noted_at = loop_now
        await self.context.connections.note_environment(self.kind, last_inbound_at=now())

    def sink_for(self, delivery: Delivery) -> ReplySink:
        connection_id, _ = split_delivery_id(delivery.dedup_id)
        if connection_id is None:
            if self.environment is None:
                raise DeliveryRejected(f"no {self.name!r} channel is configured by environment variables")
            sink = self.environment.sink_for(delivery)
            environment = self.context.environment_connections.get(self.kind)
            return sink if environment is None else MaskedSink.of(sink, environment, self.context)
        return LateSink(lambda: self._sink(delivery, connection_id))

    async def _sink(self, delivery: Delivery, connection_id: str) -> ReplySink:
        store = self.context.connections
        connection = None if store is None else await store.find(connection_id)
        if connection is None:
            raise DeliveryRejected(f"connection {connection_id} was deleted")
        handler = await self.handler()
        async with vendor_boundary(connection):
            return MaskedSink.of(handler.sink_for(delivery, connection), connection, self.context)

    # -- the vendor check (``ConnectionVerifier``) ----------------------------------------------
    async def verify(self, connection: Connection, webhook_url: str) -> str | None:
        handler = await self.handler()
        async with vendor_boundary(connection):
            return await handler.verify(connection, webhook_url)

    async def forget(self, connection: Connection) -> None:
        handler = await self.handler()
        async with vendor_boundary(connection):
            await handler.forget(connection)


class LateSink:
    """A resumed turn's reply target, found when the reply is ready (the connection is read then)."""

    streaming = False

    def __init__(self, build: Callable[[], Awaitable[ReplySink]]) -> None:
        self._build = build

    async def delta(self, text: str) -> None:  # pragma: no cover - not streaming
        raise NotImplementedError

    async def deliver(self, text: str) -> DeliveryReport:
        return await (await self._build()).deliver(text)

    async def templates(self) -> list[MessageTemplate]:  # only asked on a kind with ``Capabilities.templates``
        return await (await self._build()).templates()  # type: ignore[attr-defined]

    async def send_template(self, template: MessageTemplate, stored_message_id: str) -> DeliveryReport:
        return await (await self._build()).send_template(template, stored_message_id)  # type: ignore[attr-defined]


DOCS = {  # webhook path -> its operation in webhook_docs
    "/channels/telegram/{connection_id}/webhook": "TELEGRAM_UPDATE",
    "/channels/twilio/{connection_id}/sms": "TWILIO_SMS",
    "/channels/slack/{connection_id}/events": "SLACK_EVENTS",
    "/channels/whatsapp/{connection_id}": "WHATSAPP", "/channels/whatsapp/{connection_id}/status": "WHATSAPP_STATUS",
    "/channels/twilio/{connection_id}/voice": "TWILIO_CALL",
    "/channels/twilio/{connection_id}/voice/turn": "TWILIO_SPEECH",
    "/channels/twilio/{connection_id}/voice/status": "TWILIO_STATUS",
    "/channels/meta/{connection_id}/whatsapp": "META_WHATSAPP", "/channels/meta/{connection_id}/messenger": "META_PAGE",
    "/channels/meta/{connection_id}/instagram": "META_INSTAGRAM",
    "/channels/teams/{connection_id}/messages": "TEAMS_ACTIVITY",
}


def install_connections(context: ChannelContext, *, routes: bool) -> list[ConnectionKind]:
    """Register every kind's inbox dispatch (wrapping the environment channel of the same name) and
    vendor check; answer the kinds (whose routes a serving process mounts).

    A serving process loads the modules of the kinds it has connections of before it serves, and the
    others in the background, so the first webhook of a connection added later does not wait for
    aiogram's import."""
    kinds: list[ConnectionKind] = []
    for kind in CONNECTION_MODULES:
        entry = ConnectionKind(kind, context)
        entry.environment = context.inbox_handlers.get(entry.name)
        context.inbox_handlers[entry.name] = entry  # type: ignore[assignment]
        context.connection_verifiers[kind] = entry
        channels = {entry.name: CAPABILITIES[kind]}
        if kind == "twilio_voice":  # its calls over ConversationRelay carry the relay's channel name
            channels["twilio_relay"] = relay_capabilities(context.settings)
        for name, capabilities in channels.items():
            context.capabilities.setdefault(name, capabilities)
            context.rag_modes.setdefault(name, capabilities.rag_mode)
        kinds.append(entry)
    if routes:
        context.on_start.append(lambda: _load_in_background(kinds))
    return kinds


_loading: set[asyncio.Task[object]] = set()


async def _load_in_background(kinds: list[ConnectionKind]) -> None:
    store = kinds[0].context.connections if kinds else None
    try:
        present = {c.kind for c in await store.list()} if store is not None else set()
    except Exception as exc:  # Redis away at start: everything loads in the background
        log.warning("could not list the connections at start: %s", exc)
        present = set()
    for entry in kinds:
        if entry.kind in present:
            await entry.handler()

    async def load() -> None:
        for entry in kinds:
            try:
                await entry.handler()
            except Exception:  # the first webhook of this kind tries again, and reports it
                log.exception("could not load the %s connections' module", entry.kind)

    task = asyncio.create_task(load(), name="load connection kinds")
    _loading.add(task)
    task.add_done_callback(_loading.discard)

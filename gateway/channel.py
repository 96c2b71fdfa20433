"""The public surface of the gateway for channel adapters (``channels/``): nothing else of
``gateway`` is theirs to import (an import-linter contract checks it).

An adapter is built by its module's ``build(context: ChannelContext)``, listed in
``channels.registry``; the gateway mounts its ``router()`` and calls ``start``/``stop`` with the
app's lifespan. Messaging adapters are also ``InboxHandler``s: their webhooks only queue the
verified delivery, and the inbox's turn consumers hand it back to ``accept``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from gateway.connections.model import Connection, mask
from gateway.connections.routing import delivery_id, order_key, scope_identity, scope_thread, scoped, split_delivery_id
from gateway.connections.store import ConnectionStore
from gateway.connections.verify import ConnectionVerifier, CredentialsRefused, VendorUnreachable
from gateway.conversation.store import RedisStore
from gateway.core.errors import (
    BadRequest,
    ChannelDeliveryError,
    Conflict,
    Forbidden,
    GatewayError,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServiceUnavailable,
    Unauthorized,
)
from gateway.core.logs import masked_in_logs
from gateway.core.models import Attachment, EndReason, InboundMessage, Message, Role, SourceRef
from gateway.core.settings import Settings
from gateway.http.auth import bearer_token, client_address
from gateway.http.errors import failure
from gateway.http.json_body import InvalidJSON, JSONBodyRoute, decode_json
from gateway.http.openapi import describe_operation
from gateway.http.responses import PUBLIC, webhook_operation
from gateway.http.security_headers import chat_page_policy
from gateway.inbox.delivery import Delivery
from gateway.inbox.handler import DeliveryRejected, InboxHandler, SendWork, TurnWork, Work
from gateway.insight.feedback import Feedback, Voter
from gateway.jobs.lease import Lease, run_while_held, stopping
from gateway.media.download import MediaSource
from gateway.media.service import Refused
from gateway.services import ChannelContext
from gateway.turn.pipeline import HANDOFF_MARKER, Turn, TurnOutcome
from gateway.turn.ports import (
    Capabilities,
    DeliveryReport,
    Markup,
    MessageTemplate,
    RatedSink,
    ReplySink,
    TemplateSink,
    TranscriptSink,
)
from gateway.turn.responders import ToolEvent
from gateway.turn.runner import TurnRunner

if TYPE_CHECKING:
    from fastapi import APIRouter

__all__ = [
    "Attachment", "BadRequest", "Capabilities", "ChannelAdapter", "ChannelContext", "ChannelDeliveryError",
    "Conflict", "Connection", "ConnectionStore", "ConnectionVerifier", "CredentialsRefused", "Delivery",
    "HANDOFF_MARKER",
    "DeliveryRejected", "DeliveryReport", "EndReason", "Feedback", "Forbidden", "GatewayError",
    "InboundMessage", "InboxHandler", "InvalidInput", "InvalidJSON", "JSONBodyRoute", "Markup", "Message",
    "MessageTemplate", "TemplateSink",
    "NotFound", "PUBLIC", "PayloadTooLarge", "RateLimited", "RatedSink", "RedisStore", "ReplySink", "Role", "SendWork",
    "ServiceUnavailable", "Settings", "SourceRef", "ToolEvent", "TranscriptSink", "Turn", "TurnOutcome", "TurnRunner",
    "TurnWork", "Unauthorized", "Voter",
    "Work", "bearer_token", "chat_page_policy", "client_address", "decode_json", "describe_operation", "failure",
    "webhook_operation", "VendorUnreachable", "delivery_id", "order_key", "scope_identity", "scope_thread", "scoped",
    "split_delivery_id", "masked_in_logs", "mask", "Lease", "run_while_held", "stopping", "MediaSource", "Refused",
]


@runtime_checkable
class ChannelAdapter(Protocol):
    """One vendor: verifies and parses its webhooks into ``InboundMessage``s, renders and sends replies."""

    name: str
    capabilities: Capabilities

    def router(self) -> APIRouter: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

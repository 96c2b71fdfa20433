"""A message that came through a connection, told apart from every other connection's.

Two bots see the same Telegram user id, chat id and small message ids; two numbers the same phone.
Scoping the identity, thread and message id by the connection keeps each connection's personas,
conversations, memory and dedup its own (a person talking to a support bot and a sales bot of two
brands is two customers), and the message carries the connection's agent into its turn.
"""

from __future__ import annotations

from gateway.connections.model import Connection
from gateway.core.models import InboundMessage

__all__ = ["delivery_id", "order_key", "scope_identity", "scope_thread", "scoped", "split_delivery_id"]

_SEP = "/"


def scope_identity(identity: str, connection_id: str) -> str:
    return f"{identity}@{connection_id}"


def scope_thread(thread: str | None, connection_id: str) -> str:
    return f"{connection_id}{_SEP}{thread or ''}"


def scoped(inbound: InboundMessage, connection: Connection, persona_scope: str | None = None) -> InboundMessage:
    """``inbound`` as ``connection``'s; its sender's identity scoped by ``persona_scope`` when given (a phone
    number's line, ``ConnectionStore.persona_scope``), else by the connection."""
    cid = connection.id
    return inbound.model_copy(update={
        "identity": scope_identity(inbound.identity, persona_scope or cid),
        "external_message_id": f"{cid}{_SEP}{inbound.external_message_id}",
        "thread": scope_thread(inbound.thread, cid),
        "connection": cid,
        "agent": connection.agent,
    })


def delivery_id(connection_id: str, vendor_id: str) -> str:
    """The inbox dedup id of a connection's delivery: its vendor id, within the connection."""
    return f"{connection_id}{_SEP}{vendor_id}"


def order_key(connection_id: str, chat: str) -> str:
    return f"{connection_id}{_SEP}{chat}"


def split_delivery_id(dedup_id: str) -> tuple[str | None, str]:
    """(connection id, vendor id); no connection for an environment channel's delivery."""
    if _SEP in dedup_id:
        connection_id, vendor_id = dedup_id.split(_SEP, 1)
        return connection_id, vendor_id
    return None, dedup_id

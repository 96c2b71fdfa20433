"""Discord's Interactions endpoint: Ed25519-signed, a PING answered, ``/ask`` deferred into the inbox.

Every request carries ``X-Signature-Ed25519`` (hex) over ``X-Signature-Timestamp`` + the raw body,
made with the application's key; checked with its public key (``cryptography``), a missing or wrong
one is a 401 before anything is read or queued (Discord checks this when the URL is saved, and sends
such requests itself). ``/ask`` is queued as its own inbox item (deduplicated by the interaction's id)
and answered at once with a deferred response (type 5, "thinking…"); the reply edits it when the turn
is done (``InteractionSink``). It needs no Gateway connection.
"""

from __future__ import annotations

from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from fastapi import Request
from fastapi.responses import JSONResponse

from channels.delivery import reject_unverified
from channels.discord.payloads import ASK, queued_interaction
from gateway.channel import BadRequest, ChannelContext, Connection, InvalidJSON, decode_json, delivery_id, order_key

__all__ = ["SIGNATURE_HEADER", "TIMESTAMP_HEADER", "answer", "signed"]

SIGNATURE_HEADER, TIMESTAMP_HEADER = "X-Signature-Ed25519", "X-Signature-Timestamp"
PING, APPLICATION_COMMAND = 1, 2
PONG, CHANNEL_MESSAGE, DEFERRED_CHANNEL_MESSAGE = 1, 4, 5
EPHEMERAL = 1 << 6


def _valid(public_key: str, signature: str, timestamp: str, body: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key)).verify(
            bytes.fromhex(signature), timestamp.encode() + body)
    except (ValueError, InvalidSignature):
        return False
    return True


async def signed(request: Request, context: ChannelContext, connection: Connection) -> dict[str, Any]:
    body = await request.body()
    signature = request.headers.get(SIGNATURE_HEADER, "")
    timestamp = request.headers.get(TIMESTAMP_HEADER, "")
    if not signature or not timestamp or not _valid(connection.secret("public_key"), signature, timestamp, body):
        reject_unverified(context, "discord", f"missing or wrong {SIGNATURE_HEADER}")
    try:
        interaction = decode_json(body)
    except InvalidJSON as exc:
        raise BadRequest(exc.message) from None
    if not isinstance(interaction, dict) or not isinstance(interaction.get("type"), int):
        raise BadRequest("body: not a Discord interaction")
    return interaction


async def answer(interaction: dict[str, Any], context: ChannelContext, connection: Connection) -> JSONResponse:
    kind = interaction["type"]
    if kind == PING:
        return JSONResponse({"type": PONG})
    command = (interaction.get("data") or {}).get("name")
    if kind != APPLICATION_COMMAND or command != ASK or not interaction.get("id") or not interaction.get("token"):
        return JSONResponse({"type": CHANNEL_MESSAGE, "data": {"content": "I answer `/ask` and messages that "
                                                                          "mention me.", "flags": EPHEMERAL}})
    channel = str(interaction.get("channel_id") or "")
    await context.ack_delivery("discord", delivery_id(connection.id, f"interaction-{interaction['id']}"),
                               order_key(connection.id, channel), queued_interaction(interaction))
    return JSONResponse({"type": DEFERRED_CHANNEL_MESSAGE})

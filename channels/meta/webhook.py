"""Meta's webhook handshake and signature, and one delivery split into the items it batches.

``GET`` is the subscription check Meta makes when the URL is pasted into the app dashboard:
``hub.mode=subscribe`` with the connection's ``hub.verify_token`` is answered with ``hub.challenge``
as text; anything else is a 403. Every ``POST`` carries ``X-Hub-Signature-256: sha256=<hex
HMAC-SHA256 of the raw body with the app secret>``; a missing or wrong one is a 401 before anything
is parsed or queued. A delivery batches entries, and an entry messages and statuses: each message is
queued as its own inbox item (deduplicated by Meta's message id), each status applied at once.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from fastapi import Request, Response
from fastapi.responses import PlainTextResponse

from channels.delivery import reject_unverified
from gateway.channel import ChannelContext

__all__ = ["SIGNATURE_HEADER", "Incoming", "StatusUpdate", "challenge", "sign", "signed_body"]

SIGNATURE_HEADER = "X-Hub-Signature-256"


@dataclass(frozen=True)
class Incoming:
    """One message to queue: Meta's id for it, the chat it belongs to, the item as queued."""

    vendor_id: str
    chat: str
    body: str


@dataclass(frozen=True)
class StatusUpdate:
    """Meta's word on a message we sent: ``sent``, ``delivered``, ``read`` or ``failed`` (with why)."""

    message_id: str
    status: str
    error: str | None = None
    code: int | None = None


def sign(app_secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def challenge(request: Request, context: ChannelContext, channel: str, verify_token: str) -> Response:
    query = request.query_params
    given = query.get("hub.verify_token", "")
    if query.get("hub.mode") != "subscribe" or not verify_token or not hmac.compare_digest(
            given.encode(), verify_token.encode()):
        reject_unverified(context, channel, "hub.mode=subscribe with this connection's hub.verify_token expected",
                          status=403)
    return PlainTextResponse(query.get("hub.challenge", ""))


async def signed_body(request: Request, context: ChannelContext, channel: str, app_secret: str) -> bytes:
    body = await request.body()
    given = request.headers.get(SIGNATURE_HEADER, "")
    if not app_secret or not hmac.compare_digest(given.encode(), sign(app_secret, body).encode()):
        reject_unverified(context, channel, f"missing or wrong {SIGNATURE_HEADER}")
    return body

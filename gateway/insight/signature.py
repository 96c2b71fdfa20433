"""The signature on an event webhook, in the scheme Stripe uses: ``X-Switchboard-Signature:
t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + raw body)>``. The timestamp is inside what is
signed, so a receiver that refuses a ``t`` older than a few minutes refuses a replayed delivery."""

from __future__ import annotations

import hashlib
import hmac
import time

__all__ = ["HEADER", "TOLERANCE_S", "sign", "verify"]

HEADER = "X-Switchboard-Signature"
TOLERANCE_S = 300  # what a receiver should accept between our clock and its own


def _digest(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The header's value for ``body`` sent now (or at ``timestamp``)."""
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={_digest(secret, t, body)}"


def verify(secret: str, body: bytes, header: str, tolerance_s: int = TOLERANCE_S, now: float | None = None) -> bool:
    """What a receiver checks: a ``v1`` signature of this body and timestamp, the timestamp recent."""
    parts = [part.split("=", 1) for part in header.split(",") if "=" in part]
    stamps = [value for name, value in parts if name == "t"]
    if len(stamps) != 1 or not stamps[0].isdigit():
        return False
    t = int(stamps[0])
    if abs((time.time() if now is None else now) - t) > tolerance_s:
        return False
    expected = _digest(secret, t, body)
    return any(name == "v1" and hmac.compare_digest(value, expected) for name, value in parts)

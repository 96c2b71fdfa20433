"""A fake ConversationRelay client: Twilio's side of a call's WebSocket, signed as Twilio signs it."""

from __future__ import annotations

import json
import time
from urllib.parse import urlparse

from twilio.request_validator import RequestValidator
from websockets.sync.client import connect

from channels.twilio_relay import relay_url
from tests.channels import vendors
from tests.fakes import twilio_api

CALL_SID = "CA" + "1" * 32


def socket(live, signed: bool = True):
    url = relay_url(vendors.PUBLIC_URL)
    headers = {"X-Twilio-Signature": RequestValidator(twilio_api.AUTH_TOKEN).compute_signature(url, {})}
    local = f"ws://{urlparse(live.url).netloc}{urlparse(url).path}"
    return connect(local, additional_headers=headers if signed else {}, open_timeout=10)


def setup(ws, call_sid: str = CALL_SID, caller: str = vendors.CALLER) -> None:
    ws.send(json.dumps({"type": "setup", "sessionId": "VX1", "callSid": call_sid, "from": caller,
                        "to": twilio_api.FROM_NUMBER, "direction": "inbound", "customParameters": {}}))


def prompt(ws, text: str) -> None:
    ws.send(json.dumps({"type": "prompt", "voicePrompt": text, "lang": "en-US", "last": True}))


def tokens(ws, until_last: bool = True, timeout: float = 15) -> list[tuple[float, dict]]:
    """(arrival time, message) until the reply's ``last`` token (or an ``end``), or the timeout."""
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            message = json.loads(ws.recv(timeout=max(0.01, deadline - time.monotonic())))
        except TimeoutError:
            break
        got.append((time.monotonic(), message))
        if message.get("type") == "end" or (until_last and message.get("last")):
            break
    return got

"""A fake ConversationRelay client: Twilio's side of a call's WebSocket, as Twilio opens it.

Twilio posts the incoming-call webhook (signed), reads the ``<ConversationRelay url>`` from the TwiML
answer (it carries the call's single-use ticket) and opens that URL with ``X-Twilio-Signature``
computed over the whole URL, query included."""

from __future__ import annotations

import html
import json
import re
import time
from urllib.parse import urlparse

import httpx
from twilio.request_validator import RequestValidator
from websockets.sync.client import connect

from tests.channels import vendors
from tests.fakes import twilio_api

CALL_SID = "CA" + "1" * 32
_RELAY_URL = re.compile(r'<ConversationRelay [^>]*\burl="([^"]+)"')


def relay_url_of(twiml: str) -> str:
    found = _RELAY_URL.search(twiml)
    assert found, f"no <ConversationRelay url> in {twiml!r}"
    return html.unescape(found.group(1))


def incoming_call(live, call_sid: str = CALL_SID, caller: str = vendors.CALLER, *,
                  path: str = "/channels/twilio/voice", token: str = twilio_api.AUTH_TOKEN) -> str:
    """Twilio's signed incoming-call webhook for this call (to the number whose webhook is ``path``,
    signed with its account's ``token``): the relay URL its answer names."""
    with httpx.Client(base_url=live.url, timeout=10) as client:
        answer = vendors.post_twilio(client, path, vendors.call_params(call_sid, sender=caller), token=token)
    assert answer.status_code == 200, answer.text
    return relay_url_of(answer.text)


def signature(url: str, token: str = twilio_api.AUTH_TOKEN) -> str:
    return RequestValidator(token).compute_signature(url, {})


def open_url(live, url: str, headers: dict[str, str] | None = None, **options):
    """Open ``url`` (as Twilio was told it) on the live gateway, with ``headers`` as they are."""
    parts = urlparse(url)
    local = f"ws://{urlparse(live.url).netloc}{parts.path}" + (f"?{parts.query}" if parts.query else "")
    return connect(local, additional_headers=headers or {}, open_timeout=10, **options)


def socket(live, call_sid: str = CALL_SID, caller: str = vendors.CALLER, *, url: str | None = None,
           signed: bool = True, path: str = "/channels/twilio/voice", token: str = twilio_api.AUTH_TOKEN,
           **options):
    """A relay socket for a call, opened as Twilio opens it (a fresh call's URL unless ``url`` is given),
    to the number whose incoming-call webhook is ``path`` and whose account's ``token`` signs."""
    url = url or incoming_call(live, call_sid, caller, path=path, token=token)
    return open_url(live, url, {"X-Twilio-Signature": signature(url, token)} if signed else {}, **options)


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

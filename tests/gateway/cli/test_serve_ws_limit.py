"""`switchboard serve` bounds the WebSocket messages uvicorn buffers (``ws_max_size``, 16 MiB by default)
to the largest request body the app takes, or the relay's frame limit when that is larger (issue 38):
a message past it closes its socket (1009) in the server, before any of it reaches the app."""

from __future__ import annotations

import html
import re

import httpx
from twilio.request_validator import RequestValidator
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.fakes.live_server import free_port
from tests.gateway.cli.test_serve_address import _serve, _stop

TOKEN = "t" * 32  # the auth token _serve gives the gateway
BODY_LIMIT = 100_000  # SWITCHBOARD_MAX_BODY_BYTES here; the relay's frame limit stays 64 KiB


def _relay_socket(base: str):
    """A relay socket for a call announced by a signed incoming-call webhook, as Twilio opens it."""
    params = {"CallSid": "CA" + "3" * 32, "From": "+15550003333", "To": "+15550001111",
              "AccountSid": "AC" + "0" * 32, "CallStatus": "ringing"}
    signed = RequestValidator(TOKEN).compute_signature(f"{base}/channels/twilio/voice", params)
    answer = httpx.post(f"{base}/channels/twilio/voice", data=params, headers={"X-Twilio-Signature": signed})
    found = re.search(r'<ConversationRelay [^>]*\burl="([^"]+)"', answer.text)
    assert found, answer.text
    url = html.unescape(found.group(1))
    local = base.replace("http://", "ws://") + url[url.index("/channels/twilio/relay"):]
    return connect(local, additional_headers={"X-Twilio-Signature": RequestValidator(TOKEN).compute_signature(url, {})},
                   open_timeout=30, max_size=None)


def _close(ws) -> ConnectionClosed:
    try:
        while True:
            ws.recv(timeout=30)
    except ConnectionClosed as closed:
        return closed
    raise AssertionError("not closed")


def test_a_websocket_message_past_the_body_limit_is_refused_by_the_server(tmp_path):
    port = free_port()
    proc = _serve(tmp_path, port, SWITCHBOARD_TWILIO_VOICE_MODE="relay", SWITCHBOARD_MAX_BODY_BYTES=str(BODY_LIMIT))
    base = f"http://127.0.0.1:{port}"
    try:
        with _relay_socket(base) as ws:  # under the server's bound, past the relay's: the relay's own close
            ws.send("x" * (BODY_LIMIT - 10))
            closed = _close(ws)
        assert (closed.rcvd.code, closed.rcvd.reason) == (1009, f"frame of {BODY_LIMIT - 10} bytes; the limit is 65536")
        with _relay_socket(base) as ws:  # past the server's bound: closed before the relay reads any of it
            ws.send("x" * (BODY_LIMIT + 1))
            closed = _close(ws)
        assert closed.rcvd.code == 1009
        assert str(BODY_LIMIT) in closed.rcvd.reason and "65536" not in closed.rcvd.reason, closed.rcvd.reason
    finally:
        _stop(proc)

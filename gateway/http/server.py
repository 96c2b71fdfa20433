"""How ``switchboard serve`` runs the app under uvicorn: the options it passes beyond host and port.

Two of them bound what WebSockets cost the gateway (issue 38):

- ``ws_max_size``: the largest WebSocket message uvicorn buffers before the app sees it (16 MiB by
  default). Here it is the largest request body the app takes (``SWITCHBOARD_MAX_BODY_BYTES``), or the
  relay's frame limit (``SWITCHBOARD_TWILIO_RELAY_MAX_FRAME_BYTES``) when that is set larger; a bigger
  message closes its socket (1009) before it is held in memory.
- ``http``: uvicorn's httptools protocol, less one reference cycle. Its request parser holds the protocol
  and the protocol the parser; a plain connection breaks that on ``connection_lost``, but a connection
  upgraded to a WebSocket hands its transport to the WebSocket protocol and never gets that call. Every
  socket (a relay call, a web-chat socket, refused or not) then left its upgrade protocol, parser and
  transport to the cyclic collector, which the gateway runs rarely (``gateway.http.app.GC_THRESHOLDS``).
  Dropping the parser after the upgrade frees them at once.
- ``ws``: uvicorn's protocol over the websockets library (what ``auto`` picks), less the same kind of
  cycle: the library's connection keeps its frame parser as a suspended generator whose frame holds the
  connection, so each closed socket's connection (with its permessage-deflate compressor and
  decompressor, tens of KiB) waited for a full collection as well. Closing the generator once the
  connection is lost frees it at once.

Together: 500 relay sockets a round grew the gateway's RSS by 10-18 MiB a round, round after round;
now by about 1 MiB a round after the first, then not at all (``bench/relay_sockets.py``, docs/benchmarks.md).
"""

from __future__ import annotations

from typing import Any

from gateway.core.settings import Settings

__all__ = ["serve_options", "ws_max_size"]


def ws_max_size(settings: Settings) -> int:
    return max(settings.max_body_bytes, settings.twilio_relay_max_frame_bytes)


def _http_protocol() -> type | str:
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # no httptools: uvicorn's h11 protocol, which keeps no such cycle
        return "auto"

    class UpgradeFreeingHttpToolsProtocol(HttpToolsProtocol):
        def handle_websocket_upgrade(self) -> None:
            super().handle_websocket_upgrade()
            self.parser = None  # what connection_lost does for a connection that stays HTTP

    return UpgradeFreeingHttpToolsProtocol


def _ws_protocol() -> type | str:
    try:
        from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
    except ImportError:  # no websockets: uvicorn's wsproto protocol
        return "auto"

    class ParserClosingWebSocketsProtocol(WebSocketsSansIOProtocol):
        def connection_lost(self, exc: Exception | None) -> None:
            super().connection_lost(exc)
            parser = getattr(self.conn, "parser", None)
            if parser is not None and hasattr(parser, "close"):
                parser.close()  # the generator's frame holds the connection: end it, and the cycle with it

    return ParserClosingWebSocketsProtocol


def serve_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's options for this gateway, for ``uvicorn.run`` or ``uvicorn.Config``."""
    return {"http": _http_protocol(), "ws": _ws_protocol(), "ws_max_size": ws_max_size(settings)}

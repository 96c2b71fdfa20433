"""A TCP proxy in front of a Redis server that counts what crosses the wire: commands, and round trips.

A round trip is one client write (one command, or a pipeline or a Lua call of many) answered by the
server before the client writes again on that connection; that is what costs a network hop in
production. The counter parses the client's RESP stream to count commands and names them, so a test can
say which commands a turn sent.
"""

from __future__ import annotations

import socket
import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Traffic:
    round_trips: int = 0
    commands: Counter = field(default_factory=Counter)
    trips: list[list[str]] = field(default_factory=list)  # the commands of each round trip, in order

    @property
    def command_count(self) -> int:
        return sum(self.commands.values())


class _RespCommands:
    """Incremental parser of a client's RESP stream (arrays of bulk strings): yields command names."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, data: bytes) -> list[str]:
        self.buffer += data
        names: list[str] = []
        while True:
            parsed = self._one()
            if parsed is None:
                return names
            names.append(parsed)

    def _one(self) -> str | None:
        buf = self.buffer
        if not buf.startswith(b"*"):
            end = buf.find(b"\r\n")  # an inline command
            if end < 0:
                return None
            self.buffer = buf[end + 2:]
            return buf[:end].split(b" ", 1)[0].decode(errors="replace").upper()
        end = buf.find(b"\r\n")
        if end < 0:
            return None
        count = int(buf[1:end])
        pos = end + 2
        first = ""
        for index in range(count):
            end = buf.find(b"\r\n", pos)
            if end < 0:
                return None
            length = int(buf[pos + 1:end])
            start = end + 2
            if len(buf) < start + length + 2:
                return None
            if index == 0:
                first = buf[start:start + length].decode(errors="replace").upper()
            pos = start + length + 2
        self.buffer = buf[pos:]
        return first


class RedisCounter:
    """``with RedisCounter("127.0.0.1", port) as proxy:`` then ``proxy.url``; ``proxy.take()`` returns and
    resets what was counted since the last take."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.lock = threading.Lock()
        self.traffic = Traffic()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.url = f"redis://127.0.0.1:{self.listener.getsockname()[1]}/0"
        self.closed = False

    def __enter__(self) -> RedisCounter:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.closed = True
        self.listener.close()

    def take(self) -> Traffic:
        with self.lock:
            taken, self.traffic = self.traffic, Traffic()
        return taken

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            state = {"awaiting": False}  # the client wrote and has not been answered yet
            parser = _RespCommands()
            threading.Thread(target=self._pump, args=(client, server, state, parser), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, state, None), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, state: dict, parser: _RespCommands | None) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                with self.lock:
                    if parser is not None:  # client -> server
                        names = parser.feed(data)
                        self.traffic.commands.update(names)
                        if not state["awaiting"]:
                            state["awaiting"] = True
                            self.traffic.round_trips += 1
                            state["trip"] = []
                            self.traffic.trips.append(state["trip"])
                        state["trip"].extend(names)
                    else:
                        state["awaiting"] = False
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

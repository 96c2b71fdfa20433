"""Run any ASGI app on a real uvicorn server in a background thread, on a free loopback port."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time

import uvicorn


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _Server(uvicorn.Server):
    """uvicorn's server, stopped at once: uvicorn looks at ``should_exit`` every 0.1 s, which a suite that
    stops a few servers per test (the gateway, the fake vendors) waits out over a thousand times."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exit: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop, self._exit = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        while not await self.on_tick(counter):  # still ticks: the Date header is set once a second
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exit.wait(), 0.1)

    def exit_now(self) -> None:
        self.should_exit = True
        if self._loop is not None and self._exit is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                self._loop.call_soon_threadsafe(self._exit.set)


class LiveServer:
    def __init__(self, app, port: int | None = None, graceful_timeout_s: float | None = None,
                 host: str = "127.0.0.1", **options) -> None:
        """``options``: more of uvicorn's (``gateway.http.server.serve_options``, as ``switchboard serve`` runs)."""
        self.port = port or free_port()
        self.url = f"http://{host}:{self.port}"
        config = uvicorn.Config(app, host=host, port=self.port, log_level="warning", lifespan="on",
                                timeout_graceful_shutdown=graceful_timeout_s, proxy_headers=False, **options)
        self.server = _Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self, timeout_s: float = 20.0) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("live server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.exit_now()
        self.thread.join(15)

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

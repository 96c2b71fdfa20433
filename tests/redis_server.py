"""A redis-server process of the test run's own, on a free loopback port, keeping nothing on disk."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import redis


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.directory = directory
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> str:
        for _ in range(5):  # another process may take the free port between the probe and the bind
            port = _free_port()
            self.process = subprocess.Popen(
                [self.binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
                 "--dir", str(self.directory), "--logfile", str(self.directory / "redis.log")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            url = f"redis://127.0.0.1:{port}/0"
            if self._answers(url):
                return url
            self.process.kill()
            self.process.wait()
        raise RuntimeError(f"could not start {self.binary}: see {self.directory / 'redis.log'}")

    def _answers(self, url: str) -> bool:
        client = redis.Redis.from_url(url, socket_connect_timeout=0.2)
        try:
            for _ in range(100):
                if self.process.poll() is not None:
                    return False
                try:
                    return bool(client.ping())
                except redis.ConnectionError:
                    time.sleep(0.02)
            return False
        finally:
            client.close()

    def __exit__(self, *exc_info) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()

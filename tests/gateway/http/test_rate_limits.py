"""Rate limits over HTTP on two replicas (two apps, one Redis): the admin token's failures per address,
the 429 answer with ``Retry-After``, the window's end, the client address behind a trusted proxy, the
metric of refusals."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer

ADMIN = {"Authorization": "Bearer admin-secret"}
WRONG = {"Authorization": "Bearer not-the-token"}


@pytest.fixture
def replicas(settings, request) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """Two gateways on one Redis, as two replicas behind a load balancer would be."""
    overrides = getattr(request, "param", {})
    configured = settings.model_copy(update={"admin_token_failures_per_address": 3,
                                             "admin_token_failures_window_s": 60, **overrides})
    with LiveServer(create_app(configured)) as one, LiveServer(create_app(configured)) as two, \
            httpx.Client(base_url=one.url, timeout=10) as a, httpx.Client(base_url=two.url, timeout=10) as b:
        yield a, b


def _refusals(client: httpx.Client, limit: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(f'switchboard_rate_limited_total{{limit="{limit}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_wrong_admin_tokens_lock_the_address_out_on_every_replica_until_the_window_ends(replicas):
    a, b = replicas
    assert [a.get("/api/attributes", headers=WRONG).status_code for _ in range(2)] == [401, 401]
    assert b.get("/api/attributes", headers=WRONG).status_code == 401  # the third failure, on the other replica
    for client in (a, b):
        refused = client.get("/api/attributes", headers=ADMIN)  # even the right token waits now
        assert refused.status_code == 429
        assert refused.json()["error"] == "rate_limited"
        assert "wrong admin tokens from one address: 3 per 60 s" in refused.json()["message"]
        assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert _refusals(a, "admin-token-address") == 1 and _refusals(b, "admin-token-address") == 1
    assert "admin-secret" not in a.get("/metrics").text and "127.0.0.1" not in a.get("/metrics").text


def test_the_lockout_ends_with_its_window(settings):
    configured = settings.model_copy(update={"admin_token_failures_per_address": 1,
                                             "admin_token_failures_window_s": 1})
    with LiveServer(create_app(configured)) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        for _ in range(3):  # the window is 1 s: on a slow machine it may end before the right token comes
            assert client.get("/api/attributes", headers=WRONG).status_code == 401
            if (locked := client.get("/api/attributes", headers=ADMIN)).status_code == 429:
                break
        assert locked.status_code == 429 and locked.headers["retry-after"] == "1"
        deadline = time.monotonic() + 3
        while (answer := client.get("/api/attributes", headers=ADMIN)).status_code == 429:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert answer.status_code == 200 and "attributes" in answer.json()


def test_the_right_token_and_a_missing_one_count_no_failures(replicas):
    a, _ = replicas
    for _ in range(5):
        assert a.get("/api/attributes", headers=ADMIN).status_code == 200
        assert a.get("/api/attributes").status_code == 401
    assert a.get("/api/attributes", headers=WRONG).status_code == 401
    assert a.get("/api/attributes", headers=ADMIN).status_code == 200


def test_a_forwarded_address_counts_only_behind_a_trusted_proxy(settings):
    configured = settings.model_copy(update={"admin_token_failures_per_address": 2, "trusted_proxies": "127.0.0.0/8"})
    with LiveServer(create_app(configured)) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        for _ in range(2):
            client.get("/api/attributes", headers={**WRONG, "X-Forwarded-For": "198.51.100.7"})
        assert client.get("/api/attributes", headers={**ADMIN, "X-Forwarded-For": "198.51.100.7"}).status_code == 429
        # Another client behind the same proxy, and one that spoofs an address before the proxy's, are not it.
        assert client.get("/api/attributes", headers={**ADMIN, "X-Forwarded-For": "198.51.100.8"}).status_code == 200
        spoofed = {**ADMIN, "X-Forwarded-For": "198.51.100.7, 203.0.113.9"}
        assert client.get("/api/attributes", headers=spoofed).status_code == 200


def test_without_trusted_proxies_forwarded_for_is_ignored(settings):
    configured = settings.model_copy(update={"admin_token_failures_per_address": 2})
    with LiveServer(create_app(configured)) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        for n in range(2):
            client.get("/api/attributes", headers={**WRONG, "X-Forwarded-For": f"198.51.100.{n}"})
        refused = client.get("/api/attributes", headers={**ADMIN, "X-Forwarded-For": "198.51.100.99"})
        assert refused.status_code == 429  # the socket's address (127.0.0.1) made both failures


@pytest.mark.parametrize("replicas", [{"admin_token_failures_per_address": 0}], indirect=True)
def test_zero_turns_the_admin_token_limit_off(replicas):
    a, _ = replicas
    assert {a.get("/api/attributes", headers=WRONG).status_code for _ in range(12)} == {401}
    assert a.get("/api/attributes", headers=ADMIN).status_code == 200

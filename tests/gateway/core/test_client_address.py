"""Which address a request counts against: X-Forwarded-For only through proxies we trust."""

from __future__ import annotations

import pytest

from gateway.core.client_address import ClientAddresses

TRUSTED = ClientAddresses("10.0.0.0/8, 192.0.2.1")


@pytest.mark.parametrize(("peer", "forwarded", "client"), [
    ("203.0.113.5", None, "203.0.113.5"),  # no proxy
    ("203.0.113.5", "198.51.100.7", "203.0.113.5"),  # an untrusted peer cannot name another address
    ("10.1.2.3", "198.51.100.7", "198.51.100.7"),  # one trusted proxy
    ("10.1.2.3", "198.51.100.7, 192.0.2.1", "198.51.100.7"),  # two trusted proxies in a chain
    ("10.1.2.3", "6.6.6.6, 198.51.100.7", "198.51.100.7"),  # what the client wrote itself is left of it
    ("10.1.2.3", "10.9.9.9", "10.9.9.9"),  # only trusted hops: the farthest one
    ("10.1.2.3", "198.51.100.7, garbage", "10.1.2.3"),  # a garbled header: the proxy itself
    (None, None, "unknown"),
])
def test_the_client_is_the_nearest_untrusted_address(peer, forwarded, client):
    assert TRUSTED.resolve(peer, forwarded) == client


def test_without_trusted_proxies_the_header_is_ignored():
    assert ClientAddresses("").resolve("127.0.0.1", "198.51.100.7") == "127.0.0.1"

"""The client's address for rate limits: the socket's peer, or, when that peer is one of the
configured trusted proxies (``SWITCHBOARD_TRUSTED_PROXIES``), the nearest address in
``X-Forwarded-For`` that is not a trusted proxy itself. Anyone can write that header, so it is
believed only from a proxy we know, and read from the right, where our own proxies appended."""

from __future__ import annotations

import ipaddress

__all__ = ["ClientAddresses", "limit_bucket"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class ClientAddresses:
    def __init__(self, trusted_proxies: str) -> None:
        self._trusted: list[Network] = [
            ipaddress.ip_network(part.strip(), strict=False) for part in trusted_proxies.split(",") if part.strip()
        ]

    def _is_trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in self._trusted)

    def resolve(self, peer: str | None, forwarded_for: str | None) -> str:
        """``peer`` is the socket's address; ``forwarded_for`` the raw header (all its lines joined)."""
        address = peer or "unknown"
        if not forwarded_for or not self._is_trusted(address):
            return address
        for hop in reversed([h.strip() for h in forwarded_for.split(",") if h.strip()]):
            try:
                ipaddress.ip_address(hop)
            except ValueError:
                return address  # a garbled header: the last proxy we trust is all we know
            address = hop
            if not self._is_trusted(hop):
                return hop
        return address


def limit_bucket(address: str) -> str:
    """What a per-address limit counts against: an IPv4 address itself, an IPv6 client by its /64.
    One IPv6 subscriber (a home line, a cloud host) is routinely given a whole /64, so counting single
    addresses would give them 2**64 fresh counters; an IPv4-mapped address counts as its IPv4."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address  # "unknown": no socket peer
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)

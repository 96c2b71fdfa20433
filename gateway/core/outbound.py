"""Outbound fetch guard: webhook targets may not reach loopback, private, link-local or metadata
addresses unless ``SWITCHBOARD_OUTBOUND_ALLOW_HOSTS`` names the host or a CIDR containing it.

``pinned`` turns a checked URL into the request that connects to the very address that was
checked (the host stays in ``Host`` and in TLS SNI and certificate checks), so a DNS answer that
changes between the check and the connection (DNS rebinding) cannot redirect the fetch."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from gateway.core.errors import InvalidInput

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata", "instance-data"})
_METADATA_IPS = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)


class OutboundRefused(InvalidInput):
    """A URL the gateway will not fetch (scheme, unresolvable, or a forbidden address)."""


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """The addresses ``host`` resolves to (the host itself when it is an IP literal)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise OutboundRefused(f"outbound URL host {host!r} does not resolve: {exc}") from exc
    return sorted({ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos}, key=str)


Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]


@dataclass(frozen=True)
class OutboundPolicy:
    allowed_hosts: frozenset[str] = frozenset()
    allowed_networks: tuple[IPNetwork, ...] = ()
    resolver: Resolver = system_resolver  # tests give one that answers what they need

    @classmethod
    def parse(cls, spec: str, resolver: Resolver = system_resolver) -> OutboundPolicy:
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for item in (part.strip() for part in spec.split(",")):
            if not item:
                continue
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                hosts.add(item.lower().rstrip("."))
        return cls(frozenset(hosts), tuple(networks), resolver)

    def _allowed_ip(self, ip: IPAddress) -> bool:
        return any(ip in net for net in self.allowed_networks)

    def forbidden_reason(self, ip: IPAddress) -> str | None:
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if self._allowed_ip(ip):
            return None
        if ip in _METADATA_IPS:
            return "a cloud metadata address"
        for attr, what in (
            ("is_unspecified", "an unspecified address"),
            ("is_loopback", "a loopback address"),
            ("is_link_local", "a link-local address"),
            ("is_private", "a private address"),
            ("is_multicast", "a multicast address"),
            ("is_reserved", "a reserved address"),
        ):
            if getattr(ip, attr):
                return what
        return None

    async def check(self, url: str) -> list[IPAddress]:
        """The addresses ``url`` resolves to, all permitted; ``OutboundRefused`` otherwise."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise OutboundRefused(f"outbound URL must be http(s) with a host: {url!r}")
        host = parts.hostname.lower().rstrip(".")
        if host in self.allowed_hosts:
            return []
        if host in _METADATA_HOSTS:
            raise OutboundRefused(f"outbound URL host {host!r} is a cloud metadata service")
        addresses = await self.resolver(host, parts.port or (443 if parts.scheme == "https" else 80))
        for ip in addresses:
            reason = self.forbidden_reason(ip)
            if reason is not None:
                raise OutboundRefused(
                    f"outbound URL host {host!r} resolves to {ip}, {reason}; "
                    "allow it in SWITCHBOARD_OUTBOUND_ALLOW_HOSTS if that is intended"
                )
        return addresses


@dataclass(frozen=True)
class PinnedRequest:
    url: str
    headers: dict[str, str]
    extensions: dict[str, str]


def pinned(url: str, addresses: list[IPAddress]) -> PinnedRequest:
    """The request for ``url`` sent to ``addresses[0]``; ``url`` unchanged when nothing was resolved
    (a host the operator allowed by name)."""
    parts = urlsplit(url)
    if not addresses or not parts.hostname:
        return PinnedRequest(url, {}, {})
    ip = addresses[0]
    literal = f"[{ip}]" if ip.version == 6 else str(ip)
    userinfo, _, host_header = parts.netloc.rpartition("@")
    netloc = (f"{userinfo}@" if userinfo else "") + (literal if parts.port is None else f"{literal}:{parts.port}")
    extensions = {"sni_hostname": parts.hostname} if parts.scheme == "https" else {}
    return PinnedRequest(parts._replace(netloc=netloc).geturl(), {"Host": host_header}, extensions)

"""Outbound fetch guard: a URL the gateway fetches for an operator or a user (data injection, website
crawls, the HTTP reranker) may not reach loopback, private, link-local, shared, metadata or other
non-public addresses unless ``SWITCHBOARD_OUTBOUND_ALLOW_HOSTS`` names the host or a CIDR containing it.
Alternative spellings of an address (``127.1``, ``2130706433``, ``0x7f000001``, ``0177.0.0.1``) are read
the way a C resolver reads them, and IPv6 forms that carry an IPv4 address (mapped, compatible, 6to4,
NAT64) are judged by that IPv4 address.

``pinned`` turns a checked URL into the request that connects to the very address that was
checked (the host stays in ``Host`` and in TLS SNI and certificate checks), so a DNS answer that
changes between the check and the connection (DNS rebinding) cannot redirect the fetch."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from gateway.core.errors import InvalidInput

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata", "instance-data"})
_METADATA_IPS = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
_LOOPBACK = ipaddress.IPv4Address("127.0.0.1")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def _ipv4_part(text: str) -> int:
    if text[:2].lower() == "0x":
        return int(text[2:] or "0", 16)
    if len(text) > 1 and text.startswith("0"):
        return int(text, 8)
    return int(text, 10)


def ip_literal(host: str) -> IPAddress | None:
    """``host`` as an address when it spells one: standard forms, and the IPv4 forms ``inet_aton``
    accepts (one to four parts, each decimal, octal with a leading 0, or hex with 0x)."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(parts):
        return None
    try:
        values = [_ipv4_part(part) for part in parts]
    except ValueError:
        return None
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(values)):
        return None
    number = last
    for i, value in enumerate(head):
        number |= value << (8 * (3 - i))
    return ipaddress.IPv4Address(number)


def embedded_ipv4(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 address carries (mapped, compatible, 6to4, NAT64), else ``ip``."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return ip
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if (ip in _NAT64 or ip in _IPV4_COMPATIBLE) and int(ip) > 1:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def shown(url: str) -> str:
    """``url`` as logs and error messages may show it: no user, password, query or fragment (they can
    carry keys)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=host, query="", fragment="").geturl()


class OutboundRefused(InvalidInput):
    """A URL the gateway will not fetch (scheme, unresolvable, or a forbidden address)."""


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """The addresses ``host`` resolves to (the host itself when it is an IP literal)."""
    literal = ip_literal(host)
    if literal is not None:
        return [literal]
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

    def allowing(self, url: str | None) -> OutboundPolicy:
        """This policy with ``url``'s host allowed too (a service the operator configured by URL)."""
        host = (urlsplit(url).hostname or "") if url else ""
        return replace(self, allowed_hosts=self.allowed_hosts | {host.lower().rstrip(".")}) if host else self

    def _allowed_ip(self, ip: IPAddress) -> bool:
        return any(ip in net for net in self.allowed_networks)

    def forbidden_reason(self, ip: IPAddress) -> str | None:
        if self._allowed_ip(ip):
            return None
        ip = embedded_ipv4(ip)
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
        if not ip.is_global:  # shared (100.64.0.0/10), benchmarking, documentation ranges
            return "a non-public address"
        return None

    async def check(self, url: str) -> list[IPAddress]:
        """The addresses ``url`` resolves to, all permitted; ``OutboundRefused`` otherwise."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise OutboundRefused(f"outbound URL must be http(s) with a host: {shown(url)!r}")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise OutboundRefused(f"outbound URL has an invalid port: {shown(url)!r}") from None
        host = parts.hostname.lower().rstrip(".")
        if host in self.allowed_hosts:
            return []
        if host in _METADATA_HOSTS:
            raise OutboundRefused(f"outbound URL host {host!r} is a cloud metadata service")
        if host == "localhost" or host.endswith(".localhost"):
            addresses = [_LOOPBACK]  # RFC 6761: always loopback, whatever a resolver says
        elif (literal := ip_literal(host)) is not None:
            addresses = [literal]
        else:
            addresses = await self.resolver(host, port)
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

"""Whether vendors can reach the URLs the console shows: a loopback, private or plain-http address
is for trying things on this machine only, and the screens that show webhook URLs say so."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["GUIDE", "reachable_by_vendors"]

GUIDE = "docs/guides/connections.md#a-public-url-while-developing"


def reachable_by_vendors(public_url: str) -> bool:
    parts = urlsplit(public_url)
    host = (parts.hostname or "").lower()
    if parts.scheme != "https" or not host or host == "localhost" or host.endswith(".localhost"):
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return True  # a name: whether it is public is the operator's to know
    return address.is_global

"""Is Redis there? One clear sentence when it is not, for start-up and for the HTTP error body."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import redis

from gateway.core.errors import SwitchboardError

__all__ = ["RedisUnreachable", "check_redis", "redacted"]


class RedisUnreachable(SwitchboardError):
    """Redis cannot be reached (or its URL cannot be used) at start-up."""


def redacted(url: str) -> str:
    """``url`` without its password, fit for a log line or an error message."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def check_redis(url: str, timeout_s: float) -> None:
    """Ping ``url`` once within ``timeout_s``; ``RedisUnreachable`` with the reason otherwise."""
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    except ValueError as exc:
        raise RedisUnreachable(f"SWITCHBOARD_REDIS_URL={redacted(url)!r} is not a Redis URL: {exc}") from None
    try:
        client.ping()
    except redis.RedisError as exc:
        raise RedisUnreachable(f"cannot reach Redis at {redacted(url)}: {exc}") from None
    finally:
        client.close()

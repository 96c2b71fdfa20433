"""Downloading one media file a customer sent in a chat: through the outbound guard, with the vendor's
auth, under a size cap checked while the body streams, its type read from its bytes.

A channel says where the file is (``MediaSource``: its URL and the auth header the vendor wants); the
vendor's own base URL is allowed even when it is private (a local fake, a proxy), anything else follows
``SWITCHBOARD_OUTBOUND_ALLOW_HOSTS``. The body is held in memory for the turn only; with
``SWITCHBOARD_KEEP_MEDIA`` a copy is written under the data dir for debugging.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import filetype

from gateway.core.errors import GatewayError
from gateway.core.outbound import OutboundPolicy, OutboundRefused
from gateway.core.outbound_client import FetchFailed, FetchLimits, FetchTooLarge, GuardedClient
from gateway.core.settings import Settings

__all__ = ["Media", "MediaDownloader", "MediaSource", "MediaTooLarge", "MediaUnavailable", "sniff"]

log = logging.getLogger(__name__)
MIB = 1024 * 1024


class MediaUnavailable(GatewayError):
    """The file could not be fetched (refused, gone, unreadable); the customer gets a polite answer."""


class MediaTooLarge(MediaUnavailable):
    """Past ``SWITCHBOARD_MEDIA_MAX_MB``: refused by its declared size, or stopped while it streamed."""


@dataclass(frozen=True)
class MediaSource:
    """Where one file is and how to ask for it. ``headers`` carry the vendor's auth: never stored or logged."""

    kind: str  # voice, audio, photo, document (as the channel calls it)
    url: str | None = None
    # where the file is, asked only once it is wanted (Telegram's getFile): not for a file refused by its size
    locate: Callable[[], Awaitable[str]] | None = field(default=None, repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    declared_size: int | None = None  # the vendor's word, checked before anything is downloaded
    declared_seconds: float | None = None  # a voice note's length by the vendor's word
    filename: str | None = None
    vendor_base: str | None = None  # the vendor's configured base URL: allowed although private
    data: bytes | None = field(default=None, repr=False)  # a file uploaded to us (the web chat's recording)


@dataclass(frozen=True)
class Media:
    data: bytes = field(repr=False)
    mime_type: str  # sniffed from the bytes; ``application/octet-stream`` when nothing matched
    kind: str
    filename: str | None = None

    @property
    def size(self) -> int:
        return len(self.data)


def sniff(data: bytes) -> str:
    """The media type the bytes say they are (never the vendor's word)."""
    guess = filetype.guess(data[:8192])
    if guess is not None:
        return guess.mime
    try:
        data[:4096].decode("utf-8")
    except UnicodeDecodeError:
        return "application/octet-stream"
    return "text/plain"


class MediaDownloader:
    def __init__(self, settings: Settings, policy: OutboundPolicy) -> None:
        self.settings = settings
        self.policy = policy
        self.max_bytes = int(settings.media_max_mb * MIB)
        self.limits = FetchLimits(timeout_s=settings.outbound_timeout_s, max_bytes=self.max_bytes,
                                  max_ratio=settings.outbound_max_compression_ratio, retries=1)
        self._clients: dict[str | None, GuardedClient] = {}

    def too_large(self, size: int | None) -> bool:
        return size is not None and size > self.max_bytes

    def _client(self, vendor_base: str | None) -> GuardedClient:
        client = self._clients.get(vendor_base)
        if client is None:
            client = self._clients[vendor_base] = GuardedClient(
                self.policy.allowing(vendor_base), self.limits, user_agent="SwitchboardBot/1.0 (+chat media)",
                subject="the file")
        return client

    async def fetch(self, source: MediaSource) -> Media:
        if self.too_large(source.declared_size):
            raise MediaTooLarge(f"the {source.kind} is {source.declared_size / MIB:.1f} MB, over "
                                f"SWITCHBOARD_MEDIA_MAX_MB ({self.settings.media_max_mb:g} MB); not downloaded")
        if source.data is not None:
            if self.too_large(len(source.data)):
                raise MediaTooLarge(f"the {source.kind} is over SWITCHBOARD_MEDIA_MAX_MB "
                                    f"({self.settings.media_max_mb:g} MB)")
            return Media(source.data, sniff(source.data), source.kind, source.filename)
        url = source.url if source.locate is None else await source.locate()
        if url is None:
            raise MediaUnavailable(f"the {source.kind} has no address to download it from")
        try:
            fetched = await self._client(source.vendor_base).request("GET", url, headers=source.headers)
        except FetchTooLarge as exc:
            raise MediaTooLarge(f"the {source.kind} passed SWITCHBOARD_MEDIA_MAX_MB "
                                f"({self.settings.media_max_mb:g} MB): {exc.reason}") from None
        except (FetchFailed, OutboundRefused) as exc:
            # never the URL as it was (a Telegram file URL carries the bot token)
            reason = exc.reason if isinstance(exc, FetchFailed) else exc.message
            raise MediaUnavailable(f"the {source.kind} could not be downloaded from {_host(url)}: "
                                   f"{reason.replace(url, '…')}") from None
        media = Media(fetched.body, sniff(fetched.body), source.kind, source.filename)
        if self.settings.keep_media:
            await asyncio.to_thread(self._keep, media)
        return media

    def _keep(self, media: Media) -> None:
        folder = Path(self.settings.data_dir) / "media"
        folder.mkdir(parents=True, exist_ok=True)
        extension = filetype.get_type(mime=media.mime_type)
        name = hashlib.sha256(media.data).hexdigest()[:16] + (f".{extension.extension}" if extension else "")
        (folder / name).write_bytes(media.data)
        log.info("kept a %s of %d bytes as %s (SWITCHBOARD_KEEP_MEDIA)", media.kind, media.size, folder / name)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


def _host(url: str) -> str:
    """Only the scheme and host of ``url``: a vendor's file path may hold a secret."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}"

"""WhatsApp Cloud media (issue 44): a voice note, photo or document names a media id; ``GET /{media id}``
with the connection's token gives a short-lived URL, fetched with the same token — sent only to Meta's own
hosts (the Graph base URL's, ``*.fbsbx.com``, ``*.facebook.com``, ``*.whatsapp.net``)."""

from __future__ import annotations

from urllib.parse import urlsplit

from channels.errors import ChannelRejected
from channels.meta.graph import Graph
from gateway.channel import Attachment, MediaSource

__all__ = ["READ_KINDS", "media_sources"]

READ_KINDS = {"audio": "audio", "image": "photo", "document": "document"}  # WhatsApp's type -> the service's
_META_DOMAINS = ("fbsbx.com", "facebook.com", "whatsapp.net")


def _meta_host(url: str, graph_base: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host == (urlsplit(graph_base).hostname or "").lower() or any(
        host == d or host.endswith("." + d) for d in _META_DOMAINS)


def _source(graph: Graph, token: str, attachment: Attachment) -> MediaSource:
    media_id = attachment.file_id or ""

    async def locate() -> str:
        answer = await graph.call("GET", media_id, token, what="media")
        url = answer.get("url")
        if not isinstance(url, str) or not _meta_host(url, graph.base):
            raise ChannelRejected("Meta gave no media URL on its own hosts")  # the token goes nowhere else
        return url

    voice = attachment.kind == "audio" and (attachment.description or "").startswith("[a voice message")
    return MediaSource(kind="voice" if voice else READ_KINDS[attachment.kind], locate=locate,
                       headers={"Authorization": f"Bearer {token}"}, filename=attachment.filename,
                       vendor_base=graph.base)


def media_sources(graph: Graph, token: str, attachments: tuple[Attachment, ...]) -> list[MediaSource]:
    return [_source(graph, token, a) for a in attachments if a.kind in READ_KINDS and a.file_id]

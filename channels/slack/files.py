"""Files shared in a Slack message (issue 44): audio clips, images and documents, as the media service
reads them. Each is downloaded from its ``url_private_download`` with the bot token, which is sent only to
Slack's own hosts (``*.slack.com``, or the configured API base's host)."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from gateway.channel import Attachment, MediaSource

__all__ = ["SlackFile", "media_sources"]

DOCUMENT_TYPES = frozenset({"application/pdf", "text/plain", "text/csv",
                            "application/vnd.openxmlformats-officedocument.wordprocessingml.document"})


class SlackFile(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str
    name: str | None = None
    mimetype: str = ""
    subtype: str | None = None  # "slack_audio": a clip recorded in Slack
    size: int | None = None
    duration_ms: int | None = None
    url_private_download: str | None = None
    url_private: str | None = None

    @property
    def kind(self) -> str | None:
        """What the media service calls it; None: not a file it reads (a video, a spreadsheet)."""
        if self.subtype == "slack_audio" or self.mimetype.startswith("audio/"):
            return "audio"
        if self.mimetype.startswith("image/"):
            return "photo"
        if self.mimetype in DOCUMENT_TYPES:
            return "document"
        return None

    def attachment(self) -> Attachment:
        return Attachment(kind=self.kind or "file", file_id=self.id, mime_type=self.mimetype or None, size=self.size,
                          seconds=self.duration_ms / 1000 if self.duration_ms else None, filename=self.name)


def _slack_host(url: str, api_base: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host == "slack.com" or host.endswith(".slack.com") or host == (urlsplit(api_base).hostname or "").lower()


def media_sources(files: list[SlackFile], token: str, api_base: str) -> list[MediaSource]:
    sources = []
    for file in files:
        url = file.url_private_download or file.url_private
        if file.kind is None or url is None:
            continue
        auth = {"Authorization": f"Bearer {token}"} if _slack_host(url, api_base) else {}
        seconds = file.duration_ms / 1000 if file.duration_ms else None
        sources.append(MediaSource(kind=file.kind, url=url, headers=auth, declared_size=file.size,
                                   declared_seconds=seconds, filename=file.name, vendor_base=api_base))
    return sources

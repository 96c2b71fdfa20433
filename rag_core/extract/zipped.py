"""Limits for zip-based formats (DOCX, and any later one), checked on the archive's directory before
a parser opens it. The sizes a member declares are what ``zipfile`` will ever inflate (it stops a
member at its declared size and then fails its CRC), so a member that lies cannot go past them."""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass

from rag_core.errors import ExtractionFailed

ZIP_FORMATS = frozenset({"docx"})
_RATIO_FLOOR = 1024 * 1024  # a small member may compress as well as it likes
_MAX_MEMBERS = 10_000


@dataclass(frozen=True)
class ZipLimits:
    max_unzipped_bytes: int = 100 * 1024 * 1024
    max_ratio: float = 100.0


def check_zip(data: bytes, fmt: str, limits: ZipLimits) -> None:
    """``ExtractionFailed`` when the archive would inflate past ``limits`` (or is no archive at all)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError):
        raise ExtractionFailed(f"the {fmt.upper()} cannot be read: it is encrypted, corrupt or not a "
                               f"{fmt.upper()} file") from None
    if len(members) > _MAX_MEMBERS:
        raise ExtractionFailed(f"the {fmt.upper()} holds {len(members)} files; the limit is {_MAX_MEMBERS}")
    total = sum(m.file_size for m in members)
    if total > limits.max_unzipped_bytes:
        raise ExtractionFailed(
            f"the {fmt.upper()} unpacks to {total} bytes; the limit is {limits.max_unzipped_bytes} "
            "(SWITCHBOARD_EXTRACT_MAX_UNZIPPED_MB)")
    for member in members:
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > _RATIO_FLOOR and ratio > limits.max_ratio:
            raise ExtractionFailed(
                f"the {fmt.upper()} member {member.filename[:200]!r} unpacks {ratio:.0f} times its packed size "
                f"(a zip bomb?); the limit is {limits.max_ratio:g} (SWITCHBOARD_EXTRACT_MAX_ZIP_RATIO)")

"""What extraction produces: a document title and its blocks in reading order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

BlockKind = Literal["heading", "paragraph", "list", "code", "table", "record"]


@dataclass(frozen=True)
class Block:
    kind: BlockKind
    text: str
    level: int = 0  # heading level 1..6
    title: str | None = None  # a record's own title (a CSV row, a JSON object), when one is known


@dataclass(frozen=True)
class ExtractedDocument:
    format: str
    title: str
    blocks: list[Block]
    pages: int | None = None
    warnings: list[str] = field(default_factory=list)
    title_from_name: bool = False  # the title is only the file name: chunks under no heading are named otherwise
    # The title is the first of several top-level headings, kept in the body: each of them starts its own
    # heading path, and the title prefixes none of them (a Markdown file with more than one ``#``).
    title_is_heading: bool = False

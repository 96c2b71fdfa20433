"""Headings of a PDF that has no heading styles: its outline (bookmarks), and lines set larger or
in bold than the body text. pypdf reports each text run with its font and size; runs are joined
into lines, and a line gap wider than the usual one starts a new paragraph."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from statistics import median

from pypdf import PageObject, PdfReader

from rag_core.clean_text import scrub
from rag_core.extract.model import Block

_MAX_HEADING_CHARS = 120
_BIGGER = 1.15  # a line at least this much larger than the body text is a heading
_BOLD = re.compile(r"bold|black|heavy|semibold|demi", re.I)


@dataclass
class _Line:
    text: str = ""
    size: float = 0.0
    bold: bool = True
    y: float | None = None
    page: int = 0
    chars: Counter[float] = field(default_factory=Counter)


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def _page_lines(page: PageObject, number: int) -> list[_Line]:
    lines: list[_Line] = [_Line(page=number)]

    def visit(text: str, cm: list[float], tm: list[float], font: dict | None, font_size: float) -> None:
        parts = text.split("\n")
        for index, part in enumerate(parts):
            if index:
                lines.append(_Line(page=number))
            if not part.strip():
                continue
            scale = abs(tm[3] * cm[3]) or 1.0
            size = round(font_size * scale, 1)
            y = tm[5] * cm[3] + cm[5]
            line = lines[-1]
            if line.text and line.y is not None and abs(y - line.y) > size / 2:
                line = _Line(page=number)
                lines.append(line)
            name = str((font or {}).get("/BaseFont", ""))
            line.text += part
            line.size = max(line.size, size)
            line.bold = line.bold and bool(_BOLD.search(name))
            line.y = y if line.y is None else line.y
            line.chars[size] += len(part.strip())

    page.extract_text(visitor_text=visit)
    for line in lines:
        line.text = scrub(" ".join(line.text.split()))
    return [line for line in lines if line.text]


def _outline(reader: PdfReader) -> dict[str, int]:
    """Bookmark titles (normalised) → heading level, from the nesting of the outline."""
    levels: dict[str, int] = {}

    def walk(items: list, depth: int) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
            elif getattr(item, "title", None):
                levels.setdefault(_key(str(item.title)), min(depth, 6))

    walk(reader.outline, 1)
    return levels


def _heading_levels(lines: list[_Line], outline: dict[str, int]) -> dict[int, int]:
    """Index of each heading line → its level; empty when the PDF shows no structure."""
    sizes: Counter[float] = Counter()
    for line in lines:
        sizes.update(line.chars)
    if not sizes:
        return {}
    body = sizes.most_common(1)[0][0]
    bigger = sorted({line.size for line in lines if line.size >= body * _BIGGER}, reverse=True)
    found: dict[int, int] = {}
    for index, line in enumerate(lines):
        if len(line.text) > _MAX_HEADING_CHARS:
            continue
        if _key(line.text) in outline:
            found[index] = outline[_key(line.text)]
        elif line.size in bigger:
            found[index] = bigger.index(line.size) + 1
        elif line.bold and not line.text.endswith((".", ",", ";")):
            found[index] = len(bigger) + 1
    heading_chars = sum(len(lines[index].text) for index in found)
    if not found or heading_chars * 2 > sum(len(line.text) for line in lines):  # mostly bold or large: no structure
        return {}
    return {index: min(level, 6) for index, level in found.items()}


def structured_blocks(reader: PdfReader) -> list[Block] | None:
    """Headings and paragraphs when the PDF shows its structure, else None (plain paragraphs then)."""
    lines = [line for number, page in enumerate(reader.pages) for line in _page_lines(page, number)]
    headings = _heading_levels(lines, _outline(reader))
    if not headings:
        return None
    gaps = [a.y - b.y for a, b in zip(lines, lines[1:], strict=False)
            if a.page == b.page and a.y is not None and b.y is not None and a.y > b.y]
    usual_gap = median(gaps) if gaps else 0.0
    blocks: list[Block] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            blocks.append(Block("paragraph", " ".join(paragraph)))
            paragraph.clear()

    previous: _Line | None = None
    for index, line in enumerate(lines):
        if index in headings:
            flush()
            blocks.append(Block("heading", line.text, level=headings[index]))
        else:
            wide_gap = (previous is not None and previous.page == line.page and previous.y is not None
                        and line.y is not None and previous.y - line.y > usual_gap * 1.4)
            if previous is None or previous.page != line.page or wide_gap:
                flush()
            paragraph.append(line.text)
        previous = line
    flush()
    return blocks

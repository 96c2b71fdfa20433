"""Markdown to blocks: ATX headings, paragraphs (soft-wrapped lines joined), lists, fenced code
and pipe tables kept whole. The first H1 is the document's title."""

from __future__ import annotations

import re

from rag_core.extract.model import Block, ExtractedDocument
from rag_core.extract.text import decode

_FENCE = re.compile(r"^\s*(```|~~~)")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SETEXT = re.compile(r"^(=+|-+)\s*$")


def atx_heading(line: str, max_level: int = 6) -> tuple[int, str] | None:
    """``(level, text)`` of an ATX heading line (``## Title ##``), else None. No regex: a line of
    100,000 ``#`` or spaces must cost one pass, not a backtracking search."""
    level = len(line) - len(line.lstrip("#"))
    if not 1 <= level <= max_level:
        return None
    rest = line[level:]
    if rest and rest[0] not in " \t":
        return None
    text = rest.strip()
    unclosed = text.rstrip("#")
    if unclosed != text and (not unclosed or unclosed[-1] in " \t"):
        text = unclosed.rstrip()
    return level, text


def _kind(line: str) -> str:
    stripped = line.strip()
    if not stripped:
        return "blank"
    if stripped.startswith("|"):
        return "table"
    if _LIST_ITEM.match(line):
        return "list"
    return "paragraph"


def parse_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.split("\n")
    i = 0
    current: list[str] = []
    current_kind = ""

    def flush() -> None:
        nonlocal current, current_kind
        if current:
            joined = " ".join(s.strip() for s in current) if current_kind == "paragraph" else "\n".join(current)
            if joined.strip():
                blocks.append(Block(current_kind, joined.strip("\n")))  # type: ignore[arg-type]
        current, current_kind = [], ""

    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            flush()
            fence = _FENCE.match(line).group(1)  # type: ignore[union-attr]
            code = [line]
            i += 1
            while i < len(lines):
                code.append(lines[i])
                if lines[i].strip().startswith(fence):
                    break
                i += 1
            blocks.append(Block("code", "\n".join(code)))
            i += 1
            continue
        heading = atx_heading(line)
        if heading and heading[1]:
            flush()
            blocks.append(Block("heading", heading[1], level=heading[0]))
            i += 1
            continue
        if current_kind == "paragraph" and len(current) == 1 and _SETEXT.match(line) and line.strip():
            level = 1 if line.strip().startswith("=") else 2
            title = current[0].strip()
            current, current_kind = [], ""
            blocks.append(Block("heading", title, level=level))
            i += 1
            continue
        kind = _kind(line)
        if kind == "blank":
            flush()
        elif kind == "list" and current_kind == "list":
            current.append(line.rstrip())
        elif kind == "paragraph" and current_kind == "list" and line.startswith(("  ", "\t")):
            current.append(line.rstrip())  # a list item's continuation
        elif kind != current_kind:
            flush()
            current, current_kind = [line.rstrip()], kind
        else:
            current.append(line.rstrip())
        i += 1
    flush()
    return blocks


def document_from_blocks(fmt: str, blocks: list[Block], stem: str, warnings: list[str]) -> ExtractedDocument:
    """The first H1 becomes the title (and leaves the body); otherwise the file name's stem. With several
    H1s each is a part of its own: the first names the document and stays a heading like the others."""
    top = [index for index, block in enumerate(blocks) if block.kind == "heading" and block.level == 1]
    if len(top) > 1:
        return ExtractedDocument(fmt, blocks[top[0]].text, blocks, warnings=warnings, title_is_heading=True)
    if top:
        index = top[0]
        return ExtractedDocument(fmt, blocks[index].text, blocks[:index] + blocks[index + 1:], warnings=warnings)
    return ExtractedDocument(fmt, stem, blocks, warnings=warnings)


def extract_markdown(data: bytes, stem: str) -> ExtractedDocument:
    warnings: list[str] = []
    return document_from_blocks("markdown", parse_blocks(decode(data, warnings)), stem, warnings)

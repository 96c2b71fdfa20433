"""Bytes to text (UTF-8, else the detected legacy encoding) and plain text to paragraphs."""

from __future__ import annotations

import re

from charset_normalizer import from_bytes

from rag_core.clean_text import scrub
from rag_core.errors import ExtractionFailed
from rag_core.extract.model import Block, ExtractedDocument

_BLANK_LINES = re.compile(r"\n\s*\n")


def decode(data: bytes, warnings: list[str]) -> str:
    """UTF-8 (a BOM is dropped); otherwise the encoding charset-normalizer detects, with a warning."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        matches = list(from_bytes(data))
        if not matches:
            raise ExtractionFailed("the file is not text (no character encoding fits it)") from None
        # Among equally plausible guesses, Windows-1252 (Western Europe, the commonest legacy encoding)
        # wins: short texts fit several code pages equally well.
        best = min(matches, key=lambda m: (m.chaos, -m.coherence, m.encoding != "cp1252"))
        warnings.append(f"the file is not UTF-8; it was read as {best.encoding}")
        text = str(best)
    if "\x00" in text:
        raise ExtractionFailed("the file is not text (it contains NUL bytes)")
    return scrub(text).replace("\r\n", "\n").replace("\r", "\n")


def paragraphs(text: str) -> list[Block]:
    blocks = []
    for part in _BLANK_LINES.split(text):
        joined = " ".join(line.strip() for line in part.splitlines() if line.strip())
        if joined:
            blocks.append(Block("paragraph", joined))
    return blocks


def extract_text(data: bytes, stem: str) -> ExtractedDocument:
    warnings: list[str] = []
    return ExtractedDocument("text", stem, paragraphs(decode(data, warnings)), warnings=warnings)

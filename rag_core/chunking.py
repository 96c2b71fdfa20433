"""Extracted blocks to chunks, by one of four strategies, sized in tokens (``estimate_tokens``).

Chunks never cross a heading: each section (the blocks under one heading) is chunked on its own,
so editing one section changes only that section's chunks and an incremental re-ingest embeds
only those. Code blocks and table rows are never split inside; an oversized table is split
between rows with its header repeated. Records (a CSV row, a JSON object) are one chunk each.

Whatever the strategy, no chunk is longer than ``chunk_tokens`` nor ``max_chars``: a piece that could
not be split where the strategy splits (one unbroken 1,000,000-character token) is cut at the last
blank before the cap, or at the cap itself."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rag_core.extract.model import Block, ExtractedDocument
from rag_core.tokens import estimate_tokens

ChunkStrategy = Literal["recursive", "paragraph", "sentence", "fixed"]
_SENTENCE_END = re.compile(r"(?<=[.!?:;])\s+(?=[\"'(\[A-Z0-9])")
_TINY_TOKENS = 20
MAX_CHUNK_CHARS = 4000  # SWITCHBOARD_CHUNK_MAX_CHARS
_BLANK = re.compile(r"\s")


class ChunkingOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    strategy: ChunkStrategy = "recursive"
    chunk_tokens: int = Field(default=256, ge=32, le=2048)
    overlap_tokens: int = Field(default=32, ge=0, le=512)

    @model_validator(mode="after")
    def _overlap_fits(self) -> ChunkingOptions:
        if self.overlap_tokens >= self.chunk_tokens // 2:
            raise ValueError(
                f"overlap_tokens ({self.overlap_tokens}) must be less than half of chunk_tokens ({self.chunk_tokens})"
            )
        return self


@dataclass(frozen=True)
class Chunk:
    index: int
    text: str
    heading_path: tuple[str, ...]
    title: str | None = None


@dataclass(frozen=True)
class _Section:
    path: tuple[str, ...]
    blocks: list[Block]


def _sections(blocks: list[Block]) -> Iterator[_Section]:
    path: list[tuple[int, str]] = []
    current: list[Block] = []
    for block in blocks:
        if block.kind == "heading":
            if current:
                yield _Section(tuple(t for _, t in path), current)
                current = []
            path = [(level, text) for level, text in path if level < block.level] + [(block.level, block.text)]
        elif block.text.strip():
            current.append(block)
    if current:
        yield _Section(tuple(t for _, t in path), current)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _split_words(text: str, limit: int) -> list[str]:
    words, out, current = text.split(), [], []
    for word in words:
        if current and estimate_tokens(" ".join([*current, word])) > limit:
            out.append(" ".join(current))
            current = []
        current.append(word)
    if current:
        out.append(" ".join(current))
    return out


def _split_lines(text: str, limit: int, header: int = 0) -> list[str]:
    """Split between lines; the first ``header`` lines are repeated at the top of every piece."""
    lines = text.split("\n")
    head, body = lines[:header], lines[header:]
    out, current = [], list(head)
    for line in body:
        if len(current) > len(head) and estimate_tokens("\n".join([*current, line])) > limit:
            out.append("\n".join(current))
            current = list(head)
        current.append(line)
    if len(current) > len(head):
        out.append("\n".join(current))
    return out


def _units(block: Block, limit: int) -> list[str]:
    """The block as pieces that each fit ``limit`` where it can be split at all."""
    if estimate_tokens(block.text) <= limit:
        return [block.text]
    if block.kind == "code":
        return _split_lines(block.text, limit)
    if block.kind == "table":
        lines = block.text.split("\n")
        header = 2 if len(lines) > 1 and set(lines[1].replace("|", "").strip()) <= set("-: ") else 1
        return _split_lines(block.text, limit, header)
    if block.kind in ("list", "record"):
        return _split_lines(block.text, limit)
    pieces: list[str] = []
    for sentence in sentences(block.text):
        pieces += [sentence] if estimate_tokens(sentence) <= limit else _split_words(sentence, limit)
    return _pack(pieces, limit, " ")


def _pack(units: list[str], limit: int, joiner: str = "\n\n") -> list[str]:
    out: list[str] = []
    current: list[str] = []
    for unit in units:
        if current and estimate_tokens(joiner.join([*current, unit])) > limit:
            out.append(joiner.join(current))
            current = []
        current.append(unit)
    if current:
        out.append(joiner.join(current))
    return out


def _tail(text: str, tokens: int) -> str:
    """Whole sentences from the end of ``text`` worth at most ``tokens``."""
    picked: list[str] = []
    for sentence in reversed(sentences(text)):
        if estimate_tokens(" ".join([sentence, *picked])) > tokens:
            break
        picked.insert(0, sentence)
    return " ".join(picked)


def _with_overlap(pieces: list[str], tokens: int) -> list[str]:
    if tokens <= 0:
        return pieces
    out = pieces[:1]
    for previous, piece in zip(pieces, pieces[1:], strict=False):
        tail = _tail(previous, tokens)
        out.append(f"{tail}\n\n{piece}" if tail else piece)
    return out


def _windows(words: list[str], options: ChunkingOptions) -> list[str]:
    """Windows of whole words of at most ``chunk_tokens``, each starting ``overlap_tokens`` before
    the previous one ended."""
    ends = [0]
    for word in words:
        ends.append(ends[-1] + len(word) + 1)

    def tokens(a: int, b: int) -> int:  # words[a:b] joined by spaces
        return estimate_tokens("x" * max(ends[b] - ends[a] - 1, 0))

    out, start = [], 0
    while start < len(words):
        end = start + 1
        while end < len(words) and tokens(start, end + 1) <= options.chunk_tokens:
            end += 1
        out.append(" ".join(words[start:end]))
        if end >= len(words):
            break
        back = end
        while back - 1 > start and tokens(back - 1, end) <= options.overlap_tokens:
            back -= 1
        start = back
    return out


def _section_pieces(section: _Section, options: ChunkingOptions) -> list[str]:
    limit = options.chunk_tokens - options.overlap_tokens
    if options.strategy == "fixed":
        return _windows("\n\n".join(b.text for b in section.blocks).split(), options)
    if options.strategy == "sentence":
        units = [s for b in section.blocks for u in _units(b, limit) for s in (sentences(u) or [u])]
        return _with_overlap(_pack(units, limit, " "), options.overlap_tokens)
    if options.strategy == "paragraph":
        pieces: list[str] = []
        pending = ""
        for block in section.blocks:
            for unit in _units(block, limit):
                unit = f"{pending}\n\n{unit}" if pending else unit
                pending = ""
                if estimate_tokens(unit) < _TINY_TOKENS:
                    pending = unit
                else:
                    pieces.append(unit)
        if pending:
            if pieces and estimate_tokens(f"{pieces[-1]}\n\n{pending}") <= options.chunk_tokens:
                pieces[-1] = f"{pieces[-1]}\n\n{pending}"
            else:
                pieces.append(pending)
        return pieces
    units = [u for b in section.blocks for u in _units(b, limit)]
    return _with_overlap(_pack(units, limit), options.overlap_tokens)


def capped(text: str, max_chars: int) -> Iterator[str]:
    """``text`` in pieces of at most ``max_chars``, cut at the last blank in the second half of the
    allowance where there is one."""
    rest = text
    while len(rest) > max_chars:
        window = rest[: max_chars + 1]
        blanks = [m.start() for m in _BLANK.finditer(window, max_chars // 2)]
        cut = blanks[-1] if blanks else max_chars
        piece, rest = rest[:cut].rstrip(), rest[cut:].lstrip()
        if piece:
            yield piece
    if rest.strip():
        yield rest


def chunk_document(
    doc: ExtractedDocument, options: ChunkingOptions | None = None, max_chars: int = MAX_CHUNK_CHARS
) -> list[Chunk]:
    """The document's chunks; none longer than ``options.chunk_tokens`` (``estimate_tokens``) or
    ``max_chars`` characters."""
    options = options or ChunkingOptions()
    limit = min(max_chars, options.chunk_tokens * 4)  # estimate_tokens is ceil(chars / 4)
    chunks: list[Chunk] = []
    for section in _sections(doc.blocks):
        plain = [b for b in section.blocks if b.kind != "record"]
        if plain:
            for text in _section_pieces(_Section(section.path, plain), options):
                chunks += [Chunk(len(chunks) + i, piece, section.path) for i, piece in enumerate(capped(text, limit))]
        for record in (b for b in section.blocks if b.kind == "record"):
            for text in _split_lines(record.text, options.chunk_tokens):
                chunks += [Chunk(len(chunks) + i, piece, section.path, title=record.title)
                           for i, piece in enumerate(capped(text, limit))]
    return chunks

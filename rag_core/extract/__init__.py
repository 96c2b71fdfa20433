"""Text out of the files a business has: Markdown, plain text, HTML, PDF, DOCX, CSV, JSON and
JSON Lines, each read by a library made for it. ``extract`` is synchronous (CPU and parsing):
async callers run it in a thread."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import PurePath

from rag_core.errors import ExtractionFailed, UnsupportedFormat
from rag_core.extract.docx import extract_docx
from rag_core.extract.html import extract_html
from rag_core.extract.markdown import extract_markdown
from rag_core.extract.model import Block, BlockKind, ExtractedDocument
from rag_core.extract.pdf import extract_pdf
from rag_core.extract.records import extract_csv, extract_json, extract_jsonl
from rag_core.extract.text import extract_text
from rag_core.extract.zipped import ZIP_FORMATS, ZipLimits, check_zip

__all__ = [
    "FORMATS", "Block", "BlockKind", "ExtractedDocument", "ExtractionFailed", "UnsupportedFormat",
    "ZipLimits", "detect_format", "extract",
]

FORMATS: dict[str, tuple[str, ...]] = {
    "markdown": (".md", ".markdown"),
    "text": (".txt", ".text"),
    "html": (".html", ".htm"),
    "pdf": (".pdf",),
    "docx": (".docx",),
    "csv": (".csv",),
    "json": (".json",),
    "jsonl": (".jsonl", ".ndjson"),
}
_MEDIA_TYPES = {
    "text/markdown": "markdown", "text/x-markdown": "markdown", "text/plain": "text", "text/html": "html",
    "application/xhtml+xml": "html", "application/pdf": "pdf", "text/csv": "csv", "application/json": "json",
    "application/x-ndjson": "jsonl", "application/jsonl": "jsonl",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
}


def detect_format(filename: str, content_type: str | None = None) -> str:
    """By the file's extension, else by its media type; ``UnsupportedFormat`` names what is read."""
    suffix = PurePath(filename).suffix.lower()
    for fmt, extensions in FORMATS.items():
        if suffix in extensions:
            return fmt
    media = (content_type or "").split(";")[0].strip().lower()
    if media in _MEDIA_TYPES:
        return _MEDIA_TYPES[media]
    supported = ", ".join(f"{fmt} ({' '.join(ext)})" for fmt, ext in FORMATS.items())
    raise UnsupportedFormat(f"{filename!r} is not a supported file type; supported: {supported}", list(FORMATS))


_READERS: dict[str, Callable[[bytes, str, str | None], ExtractedDocument]] = {
    "markdown": lambda data, stem, _: extract_markdown(data, stem),
    "text": lambda data, stem, _: extract_text(data, stem),
    "html": lambda data, stem, _: extract_html(data, stem),
    "pdf": lambda data, stem, _: extract_pdf(data, stem),
    "docx": lambda data, stem, _: extract_docx(data, stem),
    "csv": extract_csv,
    "json": extract_json,
    "jsonl": extract_jsonl,
}


def extract(
    data: bytes, filename: str, *, fmt: str | None = None, row_template: str | None = None,
    zip_limits: ZipLimits | None = None,
) -> ExtractedDocument:
    """The document's title and blocks; ``ExtractionFailed`` says why a file cannot be read.
    ``row_template`` (CSV, JSON, JSON Lines) turns each record into text, e.g. ``{Product} costs {Price}``.
    A zip-based format (DOCX) is checked against ``zip_limits`` before it is parsed."""
    fmt = fmt or detect_format(filename)
    reader = _READERS.get(fmt)
    if reader is None:
        raise UnsupportedFormat(f"no extractor for format {fmt!r}", list(FORMATS))
    if fmt in ZIP_FORMATS:
        check_zip(data, fmt, zip_limits or ZipLimits())
    stem = PurePath(filename.rstrip("/")).stem or filename
    try:
        document = reader(data, stem, row_template)
    except (ExtractionFailed, MemoryError):  # a memory budget's refusal is the caller's to name
        raise
    except RecursionError:
        raise ExtractionFailed(f"the {fmt} file is nested too deeply to read") from None
    except Exception as exc:  # the parsers' boundary: a hostile file may break them in any way; say so, per file
        raise ExtractionFailed(f"the {fmt} file cannot be read ({type(exc).__name__}: {exc})"[:500]) from exc
    return replace(document, title_from_name=True) if document.title == stem else document

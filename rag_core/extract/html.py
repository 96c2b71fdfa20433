"""HTML to blocks: trafilatura finds the main content (navigation, headers, footers and
boilerplate left out) and renders it as Markdown, which the Markdown reader turns into blocks."""

from __future__ import annotations

import logging

import trafilatura

from rag_core.errors import ExtractionFailed
from rag_core.extract.markdown import document_from_blocks, parse_blocks
from rag_core.extract.model import ExtractedDocument
from rag_core.extract.text import decode

# trafilatura logs every page it finds too short at WARNING; the document's status says it once.
logging.getLogger("trafilatura").setLevel(logging.ERROR)


def html_as_text(html: str) -> str:
    """All the readable text of a short HTML document such as a mail, as plain lines ("" when none).

    Recall first: a page's main-content guess would keep a mail's quoted history (its longest block)
    and drop the two lines the customer wrote above it."""
    options = {"output_format": "txt", "include_tables": True, "include_comments": False, "include_links": False}
    return (trafilatura.extract(html, favor_recall=True, **options) or "").strip()


def extract_html(data: bytes, stem: str) -> ExtractedDocument:
    warnings: list[str] = []
    html = decode(data, warnings)
    options = {"output_format": "markdown", "include_tables": True, "include_comments": False, "include_links": False}
    # Precision first: on a short page the default falls back to a baseline that keeps the navigation.
    markdown = trafilatura.extract(html, favor_precision=True, **options) or trafilatura.extract(html, **options)
    if not markdown or not markdown.strip():
        raise ExtractionFailed("the page has no readable main text")
    metadata = trafilatura.extract_metadata(html)
    title = (metadata.title if metadata and metadata.title else "").strip()
    document = document_from_blocks("html", parse_blocks(markdown), title or stem, warnings)
    if title and document.title != title:  # the page's <title> wins over a first H1 in the body
        return ExtractedDocument("html", title, document.blocks, warnings=warnings)
    return document

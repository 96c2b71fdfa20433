"""PDF to blocks through pypdf's text layer, page by page. A scanned PDF (pages without text)
is refused with that reason; OCR is not done."""

from __future__ import annotations

import io
import logging

from pypdf import PdfReader
from pypdf.errors import PdfReadError, PyPdfError

from rag_core.clean_text import scrub
from rag_core.errors import ExtractionFailed
from rag_core.extract.model import Block, ExtractedDocument
from rag_core.extract.text import paragraphs

logging.getLogger("pypdf").setLevel(logging.ERROR)  # a malformed file is reported on the document


def extract_pdf(data: bytes, stem: str) -> ExtractedDocument:
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ExtractionFailed("the PDF is encrypted; upload a copy without a password")
        pages = [scrub(page.extract_text() or "") for page in reader.pages]
        metadata = reader.metadata
        meta_title = (metadata.title or "").strip() if metadata else ""
    except ExtractionFailed:
        raise
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise ExtractionFailed(f"the PDF cannot be read: {exc}") from None
    if not pages:
        raise ExtractionFailed("the PDF has no pages")
    blocks: list[Block] = []
    for text in pages:
        blocks.extend(paragraphs(text))
    if not blocks:
        raise ExtractionFailed(
            f"the PDF has no text layer ({len(pages)} page(s), probably scanned images); "
            "OCR is not supported, so export it with text or upload the text itself"
        )
    warnings = []
    empty = sum(1 for text in pages if not text.strip())
    if empty:
        warnings.append(f"{empty} of {len(pages)} page(s) have no text layer and were skipped")
    title = meta_title if meta_title and not meta_title.lower().startswith(("untitled", "microsoft word")) else stem
    return ExtractedDocument("pdf", title, blocks, pages=len(pages), warnings=warnings)

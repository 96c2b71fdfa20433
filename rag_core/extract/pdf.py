"""PDF to blocks through pypdf's text layer, page by page, with headings where the PDF shows them
(outline, larger or bold lines; see ``pdf_structure``). A scanned PDF (pages without text) is
refused with that reason; OCR is not done."""

from __future__ import annotations

import io
import logging

from pypdf import PdfReader
from pypdf.errors import PdfReadError, PyPdfError

from rag_core.clean_text import scrub
from rag_core.errors import ExtractionFailed
from rag_core.extract.model import Block, ExtractedDocument
from rag_core.extract.pdf_structure import structured_blocks
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
        structured = structured_blocks(reader) if any(text.strip() for text in pages) else None
    except ExtractionFailed:
        raise
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise ExtractionFailed(f"the PDF cannot be read: {exc}") from None
    if not pages:
        raise ExtractionFailed("the PDF has no pages")
    blocks: list[Block] = list(structured or [])
    if not structured:
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
    title = meta_title if meta_title and not meta_title.lower().startswith(("untitled", "microsoft word")) else ""
    top = [i for i, block in enumerate(blocks) if block.kind == "heading" and block.level == 1]
    if not title and top == [0] and len(blocks) > 1:  # one title heading on top names the document
        title, blocks = blocks[0].text, blocks[1:]
    title = title or stem
    return ExtractedDocument("pdf", title, blocks, pages=len(pages), warnings=warnings)

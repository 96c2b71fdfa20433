"""A document sent in a chat (PDF, DOCX, text) read with the ingestion extractors, in their sandbox and
under the same limits as an uploaded document; its text is for the conversation's model only and never
enters a knowledge base."""

from __future__ import annotations

from gateway.core.errors import GatewayError
from gateway.media.download import Media
from rag_core.chunking import ChunkingOptions
from rag_core.errors import ExtractionFailed, UnsupportedFormat
from rag_core.extract import detect_format
from rag_core.extraction_sandbox import ExtractBudget, ExtractionSandbox

__all__ = ["ChatDocuments", "DocumentUnreadable"]

CHARS_PER_TOKEN = 4
_FORMATS = {"application/pdf": "document.pdf", "text/plain": "document.txt",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "document.docx",
            "application/zip": "document.docx"}  # a DOCX is a zip by its bytes


class DocumentUnreadable(GatewayError):
    """Not a document the extractors read, or one that broke a limit (a bomb, a timeout)."""


class ChatDocuments:
    def __init__(self, budget: ExtractBudget, max_tokens: int) -> None:
        self.sandbox = ExtractionSandbox(budget)
        self.max_chars = max_tokens * CHARS_PER_TOKEN

    async def text(self, media: Media) -> tuple[str, bool]:
        """The document's text cut to the cap, and whether it was cut."""
        name = media.filename or _FORMATS.get(media.mime_type, "document")
        try:
            fmt = detect_format(name, media.mime_type)
            if fmt not in ("pdf", "docx", "text", "markdown", "csv", "json", "html"):
                raise UnsupportedFormat(f"{fmt} files are not read in a chat", [])
            prepared = await self.sandbox.prepare(media.data, name, fmt, None, ChunkingOptions())
        except (ExtractionFailed, UnsupportedFormat) as exc:
            raise DocumentUnreadable(str(exc)) from None
        text = "\n\n".join(block.text for block in prepared.document.blocks if block.text.strip())
        if not text.strip():
            raise DocumentUnreadable("the document has no text to read (a scan?)")
        return text[:self.max_chars], len(text) > self.max_chars

"""DOCX to blocks with python-docx, in document order: headings from the Heading/Title styles,
list paragraphs, and tables as Markdown pipe rows (header row first)."""

from __future__ import annotations

import io
import re
import zipfile

import docx
from docx.document import Document as DocxDocument
from docx.opc.exceptions import PackageNotFoundError
from docx.oxml.ns import qn
from docx.table import Table
from docx.text.paragraph import Paragraph

from rag_core.clean_text import scrub
from rag_core.errors import ExtractionFailed
from rag_core.extract.model import Block, ExtractedDocument

_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.I)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _table(table: Table) -> str:
    rows = [[_cell(cell.text) for cell in row.cells] for row in table.rows]
    if not rows:
        return ""
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def _paragraph_block(paragraph: Paragraph) -> Block | None:
    text = scrub(paragraph.text).strip()
    if not text:
        return None
    style = (paragraph.style.name if paragraph.style is not None else "") or ""
    heading = _HEADING_STYLE.match(style)
    if heading:
        return Block("heading", text, level=int(heading.group(1)))
    if style.lower() == "title":
        return Block("heading", text, level=1)
    numbered = paragraph._p.pPr is not None and paragraph._p.pPr.numPr is not None
    if numbered or "list" in style.lower():
        return Block("list", f"- {text}")
    return Block("paragraph", text)


def _blocks(document: DocxDocument) -> list[Block]:
    blocks: list[Block] = []
    for element in document.element.body.iterchildren():
        if element.tag == qn("w:p"):
            block = _paragraph_block(Paragraph(element, document))
        elif element.tag == qn("w:tbl"):
            text = _table(Table(element, document))
            block = Block("table", text) if text else None
        else:
            continue
        if block is None:
            continue
        if block.kind == "list" and blocks and blocks[-1].kind == "list":
            blocks[-1] = Block("list", f"{blocks[-1].text}\n{block.text}")
        else:
            blocks.append(block)
    return blocks


def extract_docx(data: bytes, stem: str) -> ExtractedDocument:
    try:
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, PackageNotFoundError) as exc:
        raise ExtractionFailed("the DOCX cannot be read: it is encrypted, corrupt or not a DOCX file") from exc
    except (KeyError, ValueError) as exc:
        reason = str(exc)
        raise ExtractionFailed(f"the DOCX cannot be read: {reason}") from None
    blocks = _blocks(document)
    core_title = (document.core_properties.title or "").strip()
    if core_title:
        return ExtractedDocument("docx", core_title, blocks)
    for index, block in enumerate(blocks):
        if block.kind == "heading" and block.level == 1:
            return ExtractedDocument("docx", block.text, blocks[:index] + blocks[index + 1:])
    return ExtractedDocument("docx", stem, blocks)

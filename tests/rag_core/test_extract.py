"""Every supported format, from real files made here: what text comes out, what stays out, and
the reason a file that cannot be read is refused with."""

from __future__ import annotations

import io
import json

import pytest
from fpdf import FPDF
from pypdf import PdfReader, PdfWriter

from rag_core.errors import ExtractionFailed, UnsupportedFormat
from rag_core.extract import FORMATS, detect_format, extract


def _pdf(pages: list[list[str]], title: str | None = None) -> bytes:
    pdf = FPDF()
    if title:
        pdf.set_title(title)
    pdf.set_font("helvetica", size=11)
    for lines in pages:
        pdf.add_page()
        for line in lines:
            pdf.multi_cell(0, 6, line)
            pdf.ln(4)
    return bytes(pdf.output())


def _scanned_pdf(pages: int) -> bytes:
    pdf = FPDF()
    for _ in range(pages):
        pdf.add_page()
        pdf.rect(20, 20, 100, 60, style="F")  # a picture of text, as a scanner makes it: no text layer
    return bytes(pdf.output())


def test_pdf_text_layer_is_read_page_by_page():
    data = _pdf([["Rental prices", "An e-bike costs 35 euros per day."], ["Repairs take two working days."]],
                title="Price list")
    doc = extract(data, "prices.pdf")
    assert (doc.format, doc.title, doc.pages) == ("pdf", "Price list", 2)
    text = "\n".join(b.text for b in doc.blocks)
    assert "An e-bike costs 35 euros per day." in text and "Repairs take two working days." in text


def test_a_scanned_pdf_says_it_has_no_text_layer():
    with pytest.raises(ExtractionFailed, match=r"no text layer \(3 page"):
        extract(_scanned_pdf(3), "scan.pdf")


def test_encrypted_and_corrupt_pdfs_are_refused_with_the_reason():
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(_pdf([["secret"]]))))
    writer.encrypt("pw")
    locked = io.BytesIO()
    writer.write(locked)
    with pytest.raises(ExtractionFailed, match="encrypted"):
        extract(locked.getvalue(), "locked.pdf")
    with pytest.raises(ExtractionFailed, match="cannot be read"):
        extract(_pdf([["text"]])[:200], "truncated.pdf")
    with pytest.raises(ExtractionFailed, match="cannot be read"):
        extract(b"this is not a pdf at all", "fake.pdf")


def test_docx_headings_lists_and_tables_come_out_in_order():
    import docx

    document = docx.Document()
    document.add_heading("Staff handbook", level=1)
    document.add_heading("Opening", level=2)
    document.add_paragraph("Open the shop at nine.")
    document.add_paragraph("Unlock the door", style="List Bullet")
    document.add_paragraph("Switch on the lights", style="List Bullet")
    table = document.add_table(rows=3, cols=2)
    for row, cells in zip(table.rows, [("Bike", "Price"), ("City", "15"), ("E-bike", "35")], strict=True):
        row.cells[0].text, row.cells[1].text = cells
    document.add_heading("Closing", level=2)
    document.add_paragraph("Lock up at six.")
    buffer = io.BytesIO()
    document.save(buffer)

    doc = extract(buffer.getvalue(), "handbook.docx")
    assert doc.title == "Staff handbook"
    assert [(b.kind, b.text.split("\n")[0]) for b in doc.blocks] == [
        ("heading", "Opening"), ("paragraph", "Open the shop at nine."), ("list", "- Unlock the door"),
        ("table", "| Bike | Price |"), ("heading", "Closing"), ("paragraph", "Lock up at six."),
    ]
    assert doc.blocks[2].text == "- Unlock the door\n- Switch on the lights"
    assert doc.blocks[3].text.splitlines()[2:] == ["| City | 15 |", "| E-bike | 35 |"]
    with pytest.raises(ExtractionFailed, match="DOCX cannot be read"):
        extract(b"PK\x03\x04 not really a zip", "broken.docx")


def test_html_keeps_the_article_and_drops_the_chrome():
    html = """<html><head><title>Harbor Bikes FAQ</title></head><body>
    <header><nav><a href="/">Home</a> <a href="/shop">Shop catalogue</a>
    <a href="/careers">Careers page</a></nav></header>
    <main><article><h1>Frequently asked questions</h1>
    <h2>Can I rent a child seat?</h2><p>Yes. Child seats cost 5 euros per day and fit every city bike we rent.</p>
    <h2>Do you deliver bikes?</h2><p>We deliver to hotels in the old town for a flat fee of 10 euros each way.</p>
    <table><tr><th>Item</th><th>Price</th></tr><tr><td>Helmet</td><td>free</td></tr></table>
    </article></main>
    <footer>Copyright Harbor Bikes. Cookie settings. Privacy policy.</footer></body></html>"""
    doc = extract(html.encode(), "faq.html")
    text = "\n".join(b.text for b in doc.blocks)
    assert doc.title in ("Harbor Bikes FAQ", "Frequently asked questions")  # <title> or the article's H1
    assert "Child seats cost 5 euros per day" in text and "flat fee of 10 euros" in text
    assert ("heading", "Can I rent a child seat?") in [(b.kind, b.text) for b in doc.blocks]
    assert "Careers page" not in text and "Cookie settings" not in text and "Shop catalogue" not in text
    with pytest.raises(ExtractionFailed, match="no readable main text"):  # a page its script draws
        extract(b'<html><body><div id="root"></div><script>render()</script></body></html>', "app.html")


def test_markdown_keeps_code_and_tables_whole_and_takes_the_title():
    md = ("# Setup guide\n\nInstall the app\nthen sign in.\n\n## Config\n\n"
          "```yaml\nport: 8000\n\nhost: 0.0.0.0\n```\n\n"
          "| key | default |\n|---|---|\n| port | 8000 |\n\n- one\n- two\n")
    doc = extract(md.encode(), "guide.md")
    assert doc.title == "Setup guide"
    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("paragraph", "Install the app then sign in."), ("heading", "Config"),
        ("code", "```yaml\nport: 8000\n\nhost: 0.0.0.0\n```"),
        ("table", "| key | default |\n|---|---|\n| port | 8000 |"), ("list", "- one\n- two"),
    ]


def test_text_in_a_legacy_encoding_is_read_with_a_warning():
    doc = extract("Café prices: crème brûlée 4 €.\n\nSecond paragraph.".encode("cp1252"), "menu.txt")
    assert doc.blocks[0].text == "Café prices: crème brûlée 4 €." and len(doc.blocks) == 2
    cyrillic = extract("Привет! Как дела? Это проверка кодировки.".encode("cp1251"), "note.txt")
    assert cyrillic.blocks[0].text == "Привет! Как дела? Это проверка кодировки."
    assert doc.warnings and "not UTF-8" in doc.warnings[0]


def test_csv_rows_become_records_plain_or_through_a_template():
    data = b"Product;Price;Notes\nCity bike;15;\nE-bike;35;helmet included\n"
    plain = extract(data, "prices.csv")
    assert [(b.kind, b.title, b.text) for b in plain.blocks] == [
        ("record", "City bike", "Product: City bike\nPrice: 15"),
        ("record", "E-bike", "Product: E-bike\nPrice: 35\nNotes: helmet included"),
    ]
    templated = extract(data, "prices.csv", row_template="A {Product} costs {Price} euros a day.")
    assert [b.text for b in templated.blocks] == ["A City bike costs 15 euros a day.", "A E-bike costs 35 euros a day."]
    with pytest.raises(ExtractionFailed, match=r"\{Colour\}.*Product, Price, Notes"):
        extract(data, "prices.csv", row_template="{Colour}")
    with pytest.raises(ExtractionFailed, match="empty"):
        extract(b"", "empty.csv")


def test_json_and_jsonl_records():
    items = {"items": [
        {"name": "Helmet", "price": {"day": 0}, "sizes": ["S", "M"]}, {"name": "Lock", "price": {"day": 2}},
    ]}
    doc = extract(json.dumps(items).encode(), "extras.json")
    assert [(b.title, b.text) for b in doc.blocks] == [
        ("Helmet", "name: Helmet\nprice.day: 0\nsizes: S, M"), ("Lock", "name: Lock\nprice.day: 2"),
    ]
    lines = b'{"question": "Open on Sunday?", "answer": "No."}\n\n{"question": "Parking?", "answer": "Yes."}\n'
    assert [b.title for b in extract(lines, "faq.jsonl").blocks] == ["Open on Sunday?", "Parking?"]
    with pytest.raises(ExtractionFailed, match="line 2 is not JSON"):
        extract(b'{"a": 1}\n{"a": \n', "bad.jsonl")


def test_formats_are_detected_by_extension_then_media_type_and_others_refused():
    assert detect_format("Report.PDF") == "pdf" and detect_format("page", "text/html; charset=utf-8") == "html"
    with pytest.raises(UnsupportedFormat) as refused:
        detect_format("photo.png", "image/png")
    assert ".pdf" in str(refused.value) and refused.value.supported == list(FORMATS)


def test_damaged_files_and_pathological_lines_are_refused_or_read_quickly():
    import random
    import time

    import docx

    document = docx.Document()
    for i in range(40):
        document.add_paragraph(f"Paragraph {i} about bikes and prices.")
    buffer = io.BytesIO()
    document.save(buffer)
    good = buffer.getvalue()
    rng = random.Random(7)
    for _ in range(60):  # flipped bytes anywhere: read, or refused with a reason, never another error
        damaged = bytearray(good)
        for _ in range(8):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        try:
            extract(bytes(damaged), "damaged.docx")
        except ExtractionFailed as exc:
            assert exc.reason
    started = time.perf_counter()
    for line in ("# " + "#" * 100_000 + " x", "# " + " " * 100_000 + "x#", "|" * 100_000, "- " + " " * 100_000 + "x"):
        extract(line.encode(), "long.md")
    assert time.perf_counter() - started < 30  # a hang guard: one backtracking regex took minutes per line


def _styled_pdf(parts: list[tuple[str, str, int]], outline: list[str] = (), title: str | None = None) -> bytes:
    """A PDF set as a word processor prints it without heading styles: (font style, text, size)."""
    pdf = FPDF()
    if title:
        pdf.set_title(title)
    pdf.add_page()
    for style, text, size in parts:
        if text in outline:
            pdf.start_section(text)
        pdf.set_font("helvetica", style, size)
        pdf.multi_cell(0, size * 0.6, text)
        pdf.ln(size * 0.4)
    return bytes(pdf.output())


def test_a_pdf_without_heading_styles_is_split_by_its_larger_and_bold_lines():
    from rag_core.chunking import ChunkingOptions, chunk_document
    from rag_core.document_ingestion import chunk_topics

    data = _styled_pdf([
        ("B", "Harbor Pottery handbook", 20),
        ("B", "Courses", 15), ("", "The wheel course runs on Tuesdays. It costs 120 euros for six evenings.", 11),
        ("B", "Firing", 15), ("", "We fire glazed pieces on Fridays at 1240 degrees.", 11),
        ("B", "Kiln rental", 11), ("", "Members may rent the small kiln for 20 euros a firing.", 11),
    ])
    doc = extract(data, "handbook.pdf")
    assert doc.title == "Harbor Pottery handbook"
    headings = [(b.text, b.level) for b in doc.blocks if b.kind == "heading"]
    assert headings == [("Courses", 2), ("Firing", 2), ("Kiln rental", 3)]
    topics = chunk_topics("d1", doc, chunk_document(doc, ChunkingOptions(chunk_tokens=64, overlap_tokens=0)))
    assert [t.title for t in topics] == ["Harbor Pottery handbook › Courses", "Harbor Pottery handbook › Firing",
                                         "Harbor Pottery handbook › Firing › Kiln rental"]
    assert topics[2].summary == "Members may rent the small kiln for 20 euros a firing."


def test_a_pdf_outline_names_its_sections():
    data = _styled_pdf([("", "Opening times", 11), ("", "We open at nine every weekday morning.", 11),
                        ("", "Parking", 11), ("", "Park behind the studio, never in front of the gate.", 11)],
                       outline=["Opening times", "Parking"])
    headings = [b.text for b in extract(data, "notes.pdf").blocks if b.kind == "heading"]
    assert headings == ["Opening times", "Parking"]


def test_a_pdf_without_any_structure_titles_its_chunks_by_their_first_sentence():
    from rag_core.chunking import ChunkingOptions, chunk_document
    from rag_core.document_ingestion import chunk_topics

    data = _pdf([["Glazes are food safe once fired. Ask before mixing your own. " * 3],
                 ["The studio closes in August for the holidays. Courses resume in September. " * 3]])
    doc = extract(data, "scan-2024-03.pdf")
    topics = chunk_topics("d1", doc, chunk_document(doc, ChunkingOptions(chunk_tokens=64, overlap_tokens=0)))
    assert [t.title for t in topics] == ["Glazes are food safe once fired.",
                                         "The studio closes in August for the holidays."]
    assert not any("scan-2024-03" in t.title for t in topics)


def test_a_pdf_title_said_again_by_its_top_heading_is_kept_once():
    from rag_core.chunking import ChunkingOptions, chunk_document
    from rag_core.document_ingestion import chunk_topics

    data = _styled_pdf([
        ("B", "Clay Corner Studio - Customer handbook", 20),
        ("B", "Membership", 15), ("", "A membership costs 60 euros a month and includes shelf space.", 11),
        ("B", "Firing", 15), ("", "We fire glazed pieces on Fridays at 1240 degrees.", 11),
    ], title="Handbook")
    doc = extract(data, "handbook.pdf")
    topics = chunk_topics("d1", doc, chunk_document(doc, ChunkingOptions(chunk_tokens=64, overlap_tokens=0)))
    assert [t.title for t in topics] == ["Clay Corner Studio - Customer handbook › Membership",
                                         "Clay Corner Studio - Customer handbook › Firing"]


def test_each_top_level_markdown_heading_starts_a_path_of_its_own():
    from rag_core.chunking import ChunkingOptions, chunk_document
    from rag_core.document_ingestion import chunk_topics

    md = ("# Studio guide\n\nWelcome to the studio.\n\n## Opening hours\n\nWe open at nine.\n\n"
          "# Membership\n\nMembers get shelf space.\n\n## Prices\n\n60 euros a month.\n")
    doc = extract(md.encode(), "guide.md")
    topics = chunk_topics("d1", doc, chunk_document(doc, ChunkingOptions(chunk_tokens=64, overlap_tokens=0)))
    assert doc.title == "Studio guide"
    assert [(t.title, t.summary) for t in topics] == [
        ("Studio guide", "Welcome to the studio."), ("Studio guide › Opening hours", "We open at nine."),
        ("Membership", "Members get shelf space."), ("Membership › Prices", "60 euros a month."),
    ]
    single = extract(b"# Setup guide\n\n## Config\n\nSet the port.\n", "setup.md")
    assert [t.title for t in chunk_topics("d2", single, chunk_document(single))] == ["Setup guide › Config"]

"""Chunking: sizes within budget, boundaries that never cut code or table rows, sections that
change alone, overlap, and each strategy's shape."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rag_core.chunking import ChunkingOptions, chunk_document
from rag_core.extract import extract
from rag_core.tokens import estimate_tokens

SENTENCE = "Every rental includes a lock and a basket, and the staff check the tyres before each ride. "


def _doc(md: str):
    return extract(md.encode(), "doc.md")


def _manual(repairs: str = "Flat tyres are fixed while you wait.") -> str:
    return (
        "# Manual\n\n## Renting\n\n" + SENTENCE * 12 + "\n\n" + SENTENCE * 6 + "\n\n"
        "## Repairs\n\n" + repairs + " " + SENTENCE * 3 + "\n\n"
        "## Returns\n\n" + SENTENCE * 10 + "\n"
    )


def test_recursive_chunks_fit_the_budget_and_follow_the_headings():
    options = ChunkingOptions(chunk_tokens=120, overlap_tokens=0)
    chunks = chunk_document(_doc(_manual()), options)
    assert all(estimate_tokens(c.text) <= 120 for c in chunks)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert {c.heading_path for c in chunks} == {("Renting",), ("Repairs",), ("Returns",)}
    assert sum(c.heading_path == ("Repairs",) for c in chunks) == 1


def test_editing_one_section_changes_only_that_sections_chunks():
    options = ChunkingOptions(chunk_tokens=120, overlap_tokens=24)
    before = chunk_document(_doc(_manual()), options)
    after = chunk_document(_doc(_manual("Punctures are fixed within the hour.")), options)
    changed = [(b.heading_path, b.text) for b, a in zip(before, after, strict=True) if b.text != a.text]
    assert len(before) == len(after) and [path for path, _ in changed] == [("Repairs",)]


def test_code_blocks_and_table_rows_are_never_cut():
    code = "```python\n" + "\n".join(f"value_{i} = compute({i})  # step {i}" for i in range(60)) + "\n```"
    table = "| bike | price |\n|---|---|\n" + "\n".join(f"| model {i} | {10 + i} euros |" for i in range(80))
    chunks = chunk_document(_doc(f"# T\n\n{code}\n\n{table}\n"), ChunkingOptions(chunk_tokens=100, overlap_tokens=0))
    code_lines = {line for line in code.split("\n")}
    for chunk in chunks:
        for line in chunk.text.split("\n"):
            if line.startswith("value_") or line.startswith("| model"):
                assert line in code_lines or line in table.split("\n")  # whole lines only
    table_chunks = [c for c in chunks if "| model" in c.text]
    assert len(table_chunks) > 1 and all(c.text.startswith("| bike | price |\n|---|---|") for c in table_chunks)
    assert sum(c.text.count("| model") for c in table_chunks) == 80


def test_overlap_repeats_the_end_of_the_previous_chunk():
    text = "# T\n\n" + " ".join(f"Sentence number {i} is about bikes." for i in range(80))
    chunks = chunk_document(_doc(text), ChunkingOptions(chunk_tokens=80, overlap_tokens=20))
    assert len(chunks) > 2
    for previous, chunk in zip(chunks, chunks[1:], strict=False):
        head = chunk.text.split("\n\n")[0]
        assert previous.text.endswith(head) and 0 < estimate_tokens(head) <= 20


@pytest.mark.parametrize("strategy", ["paragraph", "sentence", "fixed"])
def test_each_strategy_covers_the_whole_text_within_budget(strategy):
    options = ChunkingOptions(strategy=strategy, chunk_tokens=64, overlap_tokens=0)
    doc = _doc("# T\n\n" + "\n\n".join(f"Paragraph {i}. " + SENTENCE * (i % 3 + 1) for i in range(12)))
    chunks = chunk_document(doc, options)
    assert all(estimate_tokens(c.text) <= 64 for c in chunks)
    words = [w for b in doc.blocks for w in b.text.split()]
    assert [w for c in chunks for w in c.text.split()] == words  # in order, nothing lost, nothing doubled
    if strategy == "paragraph":  # a chunk never holds parts of two paragraphs
        assert all(c.text.count("Paragraph") <= 1 for c in chunks)


def test_fixed_windows_overlap_by_whole_words():
    doc = _doc("# T\n\n" + " ".join(f"w{i}" for i in range(400)))
    chunks = chunk_document(doc, ChunkingOptions(strategy="fixed", chunk_tokens=40, overlap_tokens=10))
    assert all(estimate_tokens(c.text) <= 40 for c in chunks)
    for previous, chunk in zip(chunks, chunks[1:], strict=False):
        first = chunk.text.split()[0]
        assert first in previous.text.split() and previous.text.split().index(first) > 0
    assert chunks[-1].text.split()[-1] == "w399"


def test_records_are_one_chunk_each_with_their_title():
    doc = extract(b"Product,Price\nCity bike,15\nE-bike,35\n", "prices.csv")
    chunks = chunk_document(doc)
    assert [(c.title, c.text) for c in chunks] == [("City bike", "Product: City bike\nPrice: 15"),
                                                   ("E-bike", "Product: E-bike\nPrice: 35")]


def test_options_refuse_an_overlap_of_half_a_chunk_or_more():
    with pytest.raises(ValidationError, match="less than half"):
        ChunkingOptions(chunk_tokens=64, overlap_tokens=32)

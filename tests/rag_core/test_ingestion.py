from __future__ import annotations

import json

import pytest

from rag_core import RAG_CONTEXT_LABEL, TopicValidationError, import_topics, parse_topic
from rag_core.ingestion import parse_markdown

GOOD = {
    "source": "s1",
    "title": "Parking",
    "facts": ["$3 per hour"],
    "body": "Garage.",
    "updated_at": "2021-02-17T12:39:41Z",
}


def test_missing_source_or_title_names_the_field():
    with pytest.raises(TopicValidationError) as missing_source:
        parse_topic({"title": "Parking"})
    assert missing_source.value.field == "source"
    with pytest.raises(TopicValidationError) as blank_title:
        parse_topic({"source": "x", "title": "   "})
    assert blank_title.value.field == "title"


async def test_jsonl_reports_bad_lines_by_number_and_imports_the_rest(make_kb):
    kb = make_kb("none")
    lines = [
        json.dumps(GOOD),
        "{not json",
        json.dumps({"source": "s2", "body": "no title"}),
        "",
        json.dumps({"title": "no source"}),
        json.dumps({**GOOD, "title": "Parking again"}),
        json.dumps({"source": "s3", "title": "Pets", "body": "Dogs welcome.", "labels": ["faq"]}),
    ]
    report = await import_topics(kb, "\n".join(lines), "jsonl")
    assert [(e.line, e.message.split(":")[0]) for e in report.errors] == [
        (2, "invalid JSON"),
        (3, "title"),
        (5, "source"),
        (6, "source"),
    ]
    assert report.valid == 2 and sorted(report.created) == ["s1", "s3"]
    parking = await kb.get("s1")
    assert parking.summary == "Garage." and parking.labels == [RAG_CONTEXT_LABEL]
    assert parking.updated_at.isoformat() == "2021-02-17T12:39:41+00:00"
    assert (await kb.get("s3")).labels == ["faq"]
    assert await kb.count() == 2


async def test_an_all_bad_file_writes_nothing(make_kb):
    kb = make_kb("none")
    report = await import_topics(kb, '{"title": "x"}\n[1, 2]\n', "jsonl")
    assert [e.line for e in report.errors] == [1, 2]
    assert await kb.count() == 0


MARKDOWN = """# Opening hours
## Facts
- Open 9am to 6pm
- Closed Sundays

We open at nine.

## Holidays
Closed on public holidays.

# Parking garage & rates
## Source
parking-v2
## Labels
rag_context, faq
Costs $3 per hour.
```
# not a heading inside code
```

#
"""


def test_markdown_one_topic_per_h1_with_facts_source_and_labels():
    parsed = parse_markdown("stray text\n" + MARKDOWN)
    hours, parking = parsed.topics
    assert hours.source == "opening-hours"
    assert hours.facts == ["Open 9am to 6pm", "Closed Sundays"]
    assert hours.summary == "We open at nine.\n\n## Holidays\nClosed on public holidays."
    assert hours.labels == [RAG_CONTEXT_LABEL]
    assert parking.source == "parking-v2" and parking.labels == ["rag_context", "faq"]
    assert "# not a heading inside code" in parking.summary
    problems = [(e.line, e.message.split(":")[0]) for e in parsed.errors]
    assert problems == [(1, "text before the first # title"), (22, "title")]


def test_markdown_soft_wrapped_paragraphs_become_one_line_each():
    from rag_core.ingestion import parse_markdown

    text = "# Prices\n\nE-bikes cost 35 euros\nper day.\n\nExtras:\n- helmet\n- lock\n\n```\nkeep\nlines\n```\n"
    [topic] = parse_markdown(text).topics
    assert topic.summary == "E-bikes cost 35 euros per day.\n\nExtras:\n- helmet\n- lock\n\n```\nkeep\nlines\n```"

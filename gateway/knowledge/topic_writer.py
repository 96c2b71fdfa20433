"""Free text to knowledge-base topics: a language model rewrites it as Markdown topics (H1 title,
a "Facts" H2 of bullets, a "Labels" H2, then the body), or, without one or when its answer does not
parse, a deterministic split by headings (Markdown's, or plain lines written as headings) and
paragraphs, so it works offline too."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gateway.core.errors import LLMError
from gateway.core.models import PromptMessage
from gateway.turn.llm import LLMClient
from rag_core.extract.markdown import parse_blocks
from rag_core.ingestion import parse_markdown

log = logging.getLogger(__name__)

PIECE_CHARS = 12_000  # one LLM call rewrites at most this much text
SPLIT_TOPIC_CHARS = 1_500  # the deterministic split groups paragraphs up to about this much
TITLE_CHARS = 80
PLAIN_HEADING_CHARS = 60  # a line without "#" is taken for a heading when it is this short at most …
PLAIN_HEADING_WORDS = 8  # … and has this many words at most

INSTRUCTIONS = """You turn a business's text into knowledge-base topics for a customer-service assistant.
Answer with Markdown only. For every topic write, in this order:
# <a short, specific title>
## Facts
- <one short fact per bullet>
## Labels
<comma-separated lower-case labels>
<the topic's full text in plain paragraphs>
Keep every piece of information from the text, split it into small topics of one subject each,
and invent nothing."""


@dataclass(frozen=True)
class DraftTopic:
    title: str
    facts: list[str]
    labels: list[str]
    summary: str


@dataclass(frozen=True)
class WrittenTopics:
    topics: list[DraftTopic]
    used_llm: bool
    note: str | None = None  # why the deterministic split was used although a model is configured


def _pieces(text: str, limit: int = PIECE_CHARS) -> list[str]:
    pieces, current = [], ""
    for paragraph in text.split("\n\n"):
        if current and len(current) + len(paragraph) + 2 > limit:
            pieces.append(current)
            current = ""
        current = f"{current}\n\n{paragraph}" if current else paragraph
    if current.strip():
        pieces.append(current)
    return [p[i:i + limit] for p in pieces for i in range(0, len(p), limit)]


def _title(text: str) -> str:
    first = text.strip().split("\n")[0]
    for end in (". ", "? ", "! "):
        if end in first:
            first = first.split(end)[0] + end.strip()
            break
    return first if len(first) <= TITLE_CHARS else first[: TITLE_CHARS - 1].rsplit(" ", 1)[0] + "…"


def _is_plain_heading(line: str) -> bool:
    """A line written as a heading without Markdown: short, capitalised, no sentence's end."""
    words = line.split()
    return (0 < len(line) <= PLAIN_HEADING_CHARS and len(words) <= PLAIN_HEADING_WORDS and line[0].isupper()
            and line[-1] not in ".,;!?" and not line.startswith(("|", "- ", "* ", "+ ")) and not line[0].isdigit())


def _is_sentence(line: str) -> bool:
    return line.endswith((".", "!", "?", ":", ")")) or len(line) > PLAIN_HEADING_CHARS


def _marked_headings(text: str) -> str:
    """``text`` with its plain headings made Markdown ones ("Opening Hours" above a paragraph becomes
    "# Opening Hours"), unless it has Markdown headings already. A plain heading starts the text or
    follows a blank line or a sentence's end, and a paragraph follows it (at once or after a blank)."""
    blocks = parse_blocks(text)
    if any(b.kind == "heading" for b in blocks) or any(b.kind == "code" for b in blocks):
        return text
    lines = [line.strip() for line in text.split("\n")]
    out: list[str] = []
    for index, line in enumerate(lines):
        before = lines[index - 1] if index else ""
        after = next((n for n in lines[index + 1:index + 3] if n), "")
        if (_is_plain_heading(line) and (not before or _is_sentence(before)) and after
                and _is_sentence(after) and not _is_plain_heading(after)):
            out += ["", f"# {line.rstrip(':')}", ""]
        else:
            out.append(line)
    return "\n".join(out)


def split_text(text: str) -> list[DraftTopic]:
    """Headings (Markdown's or plain ones, ``_marked_headings``) become topic titles; text without
    headings is grouped by paragraphs."""
    text = _marked_headings(text)
    topics: list[DraftTopic] = []
    title: str | None = None
    body: list[str] = []

    def flush() -> None:
        nonlocal body
        for group in _pieces("\n\n".join(body), SPLIT_TOPIC_CHARS) if body else []:
            topics.append(DraftTopic(title or _title(group), [], [], group.strip()))
        body = []

    for block in parse_blocks(text):
        if block.kind == "heading":
            flush()
            title = block.text
        else:
            body.append(block.text)
    flush()
    return topics


def _parsed(markdown: str) -> list[DraftTopic]:
    parsed = parse_markdown(markdown)
    return [DraftTopic(t.title, list(t.facts), [lbl for lbl in t.labels if lbl != "rag_context"], t.summary)
            for t in parsed.topics if t.summary or t.facts]


class TopicWriter:
    def __init__(self, llm: LLMClient | None) -> None:
        self._llm = llm

    async def write(self, text: str, instructions: str | None = None) -> WrittenTopics:
        if self._llm is None:
            return WrittenTopics(split_text(text), used_llm=False)
        extra = f"\n\nThe operator's instructions for this text: {instructions}" if instructions else ""
        system = INSTRUCTIONS + extra
        topics: list[DraftTopic] = []
        try:
            for piece in _pieces(text):
                answer = await self._llm.complete([
                    PromptMessage(role="system", content=system), PromptMessage(role="user", content=piece),
                ])
                found = _parsed(answer.text)
                if not found:
                    raise ValueError("the answer held no Markdown topics")
                topics += found
        except (LLMError, ValueError) as exc:
            log.warning("rewriting text as topics failed (%s); splitting it by headings and paragraphs", exc)
            note = f"the language model's answer could not be used ({exc}); the text was split by headings instead"
            return WrittenTopics(split_text(text), used_llm=False, note=note)
        return WrittenTopics(topics, used_llm=True)

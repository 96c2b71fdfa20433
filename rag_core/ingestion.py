"""Topic import from JSON Lines (the datasets' format, ``body`` → summary) and Markdown (one
topic per H1). Every entry is validated first; the good ones are then upserted in one batch
and the bad ones reported by line number, so nothing is half-written."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from rag_core.errors import ImportLineError, TopicValidationError
from rag_core.extract.markdown import atx_heading
from rag_core.knowledge_base import KnowledgeBase
from rag_core.topic import MAX_TOPIC_CHARS, Topic, parse_topic

ImportFormat = Literal["jsonl", "markdown"]
# Decodes one JSONL line; raises ValueError (or RecursionError) for a line it refuses. The HTTP
# API passes its hardened decoder (lone surrogates, depth, huge numbers) so the file's lines obey
# the same rules as any request body.
LineDecoder = Callable[[str], Any]

_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SLUG_SEPARATORS = re.compile(r"[^a-z0-9]+")


class ImportProblem(BaseModel):
    model_config = ConfigDict(frozen=True)

    line: int
    message: str


class ImportReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    valid: int
    created: list[str]
    updated: list[str]
    unchanged: list[str]
    embedded: int
    errors: list[ImportProblem]


class ParsedTopics(BaseModel):
    model_config = ConfigDict(frozen=True)

    topics: list[Topic]
    errors: list[ImportProblem]


def slugify(title: str) -> str:
    return _SLUG_SEPARATORS.sub("-", title.lower()).strip("-")


def _validated(line: int, data: dict[str, Any], seen: set[str], max_chars: int) -> Topic:
    try:
        topic = parse_topic(data, max_chars=max_chars)
    except TopicValidationError as exc:
        raise ImportLineError(line, str(exc)) from exc
    if topic.source in seen:
        raise ImportLineError(line, f"source: duplicate source {topic.source!r} in this file")
    seen.add(topic.source)
    return topic


def parse_jsonl(text: str, *, loads: LineDecoder = json.loads, max_topic_chars: int = MAX_TOPIC_CHARS) -> ParsedTopics:
    topics: list[Topic] = []
    errors: list[ImportProblem] = []
    seen: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            try:
                data = loads(raw)
            except json.JSONDecodeError as exc:
                raise ImportLineError(number, f"invalid JSON: {exc.msg}") from exc
            except ValueError as exc:  # the decoder's own refusals, or int() past 4,300 digits
                raise ImportLineError(number, str(exc)) from exc
            except RecursionError:
                raise ImportLineError(number, "invalid JSON: nested too deeply") from None
            if not isinstance(data, dict):
                raise ImportLineError(number, "expected a JSON object")
            if "body" in data:
                if "summary" in data:
                    raise ImportLineError(number, "body: give either body or summary, not both")
                data["summary"] = data.pop("body")
            topics.append(_validated(number, data, seen, max_topic_chars))
        except ImportLineError as exc:
            errors.append(ImportProblem(line=exc.line, message=exc.message))
    return ParsedTopics(topics=topics, errors=errors)


def reflow(lines: list[str]) -> str:
    """Join a paragraph's soft-wrapped lines (in Markdown a single newline is a space); blank lines,
    headings, list items, tables and fenced code keep their lines."""
    out: list[str] = []
    fenced = False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
            out.append(line)
            continue
        structural = (
            fenced or not line.strip() or _BULLET.match(line) or line.lstrip().startswith(("#", "|", ">"))
        )
        previous = out[-1] if out else ""
        joinable = previous.strip() and not _FENCE.match(previous) and not previous.lstrip().startswith(("#", "|"))
        if not structural and joinable and not fenced:
            out[-1] = f"{previous.rstrip()} {line.strip()}"
        else:
            out.append(line)
    return "\n".join(out)


class _MarkdownTopic:
    def __init__(self, line: int, title: str) -> None:
        self.line = line
        self.title = title
        self.body: list[str] = []
        self.facts: list[str] | None = None
        self.labels: list[str] | None = None
        self.source: str | None = None
        self.section: str | None = None  # the H2 collecting special lines, if any
        self.saw_h2 = False

    def heading2(self, text: str) -> None:
        name = text.strip().lower()
        first = not self.saw_h2
        self.saw_h2 = True
        if (name == "facts" and first) or name in ("labels", "source"):
            self.section = name
            return
        self.section = None
        self.body.append(f"## {text}")

    def add(self, line: str) -> None:
        if self.section is None:
            self.body.append(line)
            return
        value = line.strip()
        if not value:
            return
        bullet = _BULLET.match(line)
        if self.section == "facts" and bullet:
            self.facts = [*(self.facts or []), bullet.group(1).strip()]
        elif self.section == "labels" and bullet:
            self.labels = [*(self.labels or []), bullet.group(1).strip()]
        elif self.section == "labels" and self.labels is None:
            self.labels = [part.strip() for part in value.split(",")]
            self.section = None
        elif self.section == "source" and self.source is None:
            self.source = bullet.group(1).strip() if bullet else value
            self.section = None
        else:  # the special section ended: prose goes back to the summary
            self.section = None
            self.body.append(line)

    def data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "title": self.title,
            "source": self.source or slugify(self.title),
            "facts": self.facts or [],
            "summary": reflow(self.body).strip(),
        }
        if self.labels is not None:
            data["labels"] = self.labels
        return data


def parse_markdown(text: str, *, max_topic_chars: int = MAX_TOPIC_CHARS) -> ParsedTopics:
    """``# Title`` starts a topic. An optional first ``## Facts`` holds bullet facts;
    optional ``## Labels`` (bullets or commas) and ``## Source`` (one line) override the
    defaults (``rag_context``; the slug of the title). Everything else is the summary."""
    blocks: list[_MarkdownTopic] = []
    errors: list[ImportProblem] = []
    in_fence = False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else atx_heading(line, max_level=2)
        if heading and heading[0] == 1:
            blocks.append(_MarkdownTopic(number, heading[1]))
        elif not blocks:
            if line.strip():
                errors.append(ImportProblem(line=number, message="text before the first # title"))
        elif heading:
            blocks[-1].heading2(heading[1])
        else:
            blocks[-1].add(line)
    topics: list[Topic] = []
    seen: set[str] = set()
    for block in blocks:
        try:
            if not block.title.strip():
                raise ImportLineError(block.line, "title: empty # title")
            topics.append(_validated(block.line, block.data(), seen, max_topic_chars))
        except ImportLineError as exc:
            errors.append(ImportProblem(line=exc.line, message=exc.message))
    errors.sort(key=lambda problem: problem.line)
    return ParsedTopics(topics=topics, errors=errors)


def parse_topics(
    text: str, fmt: ImportFormat, *, loads: LineDecoder = json.loads, max_topic_chars: int = MAX_TOPIC_CHARS
) -> ParsedTopics:
    if fmt == "jsonl":
        return parse_jsonl(text, loads=loads, max_topic_chars=max_topic_chars)
    return parse_markdown(text, max_topic_chars=max_topic_chars)


def format_for(path: Path) -> ImportFormat:
    return "markdown" if path.suffix.lower() in (".md", ".markdown") else "jsonl"


async def import_topics(
    kb: KnowledgeBase, text: str, fmt: ImportFormat, *,
    loads: LineDecoder = json.loads, max_topic_chars: int = MAX_TOPIC_CHARS,
) -> ImportReport:
    parsed = parse_topics(text, fmt, loads=loads, max_topic_chars=max_topic_chars)
    upserted = await kb.upsert_many(parsed.topics)
    return ImportReport(
        valid=len(parsed.topics),
        created=upserted.created,
        updated=upserted.updated,
        unchanged=upserted.unchanged,
        embedded=upserted.embedded,
        errors=parsed.errors,
    )


async def import_file(kb: KnowledgeBase, path: Path, fmt: ImportFormat | None = None) -> ImportReport:
    text = await asyncio.to_thread(path.read_text, encoding="utf-8")
    return await import_topics(kb, text, fmt or format_for(path))

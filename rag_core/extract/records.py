"""CSV, JSON and JSON Lines to one record block per row or object: "key: value" lines, or the
row template with ``{column}`` placeholders filled in."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from rag_core.errors import ExtractionFailed
from rag_core.extract.model import Block, ExtractedDocument
from rag_core.extract.text import decode

_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
_TITLE_KEYS = ("title", "name", "question", "heading", "subject")


def _fill(template: str, row: Mapping[str, str], where: str) -> str:
    def value(match: re.Match[str]) -> str:
        key = match.group(1).strip()
        if key not in row:
            known = ", ".join(row) or "none"
            raise ExtractionFailed(f"{where}: the row template names {{{key}}} but the columns are: {known}")
        return row[key]

    return _PLACEHOLDER.sub(value, template)


def _record(row: Mapping[str, str], template: str | None, where: str) -> Block | None:
    if template:
        text = _fill(template, row, where).strip()
    else:
        text = "\n".join(f"{key}: {value}" for key, value in row.items() if value.strip())
    if not text:
        return None
    title = next((row[k] for k in row if k.strip().lower() in _TITLE_KEYS and row[k].strip()), None)
    if title is None:
        title = next((v for v in row.values() if v.strip()), None)
    return Block("record", text, title=(title or "").strip()[:200] or None)


def _flatten(value: Any, prefix: str = "") -> dict[str, str]:
    if isinstance(value, Mapping):
        out: dict[str, str] = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list):
        if all(not isinstance(v, Mapping | list) for v in value):
            return {prefix: ", ".join("" if v is None else str(v) for v in value)}
        out = {}
        for i, inner in enumerate(value):
            out.update(_flatten(inner, f"{prefix}.{i}"))
        return out
    return {prefix or "value": "" if value is None else str(value)}


def _document(fmt: str, rows: Iterable[tuple[str, Mapping[str, str]]], template: str | None, stem: str,
              warnings: list[str]) -> ExtractedDocument:
    blocks = [b for where, row in rows if (b := _record(row, template, where)) is not None]
    if not blocks:
        raise ExtractionFailed("the file has no rows with text")
    return ExtractedDocument(fmt, stem, blocks, warnings=warnings)


def extract_csv(data: bytes, stem: str, template: str | None) -> ExtractedDocument:
    warnings: list[str] = []
    text = decode(data, warnings)
    if not text.strip():
        raise ExtractionFailed("the CSV file is empty")
    try:
        dialect: Any = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    reader = csv.reader(io.StringIO(text), dialect)
    try:
        header = [h.strip() for h in next(reader)]
        rows = [
            (f"row {number}", dict(zip(header, (cell.strip() for cell in cells), strict=False)))
            for number, cells in enumerate(reader, start=2) if any(c.strip() for c in cells)
        ]
    except csv.Error as exc:
        raise ExtractionFailed(f"the CSV cannot be read: {exc}") from None
    if not any(header):
        raise ExtractionFailed("the CSV needs a header row naming its columns")
    return _document("csv", rows, template, stem, warnings)


def _objects(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, Mapping):
        lists = [v for v in value.values() if isinstance(v, list) and v and all(isinstance(i, Mapping) for i in v)]
        return lists[0] if len(lists) == 1 else [value]
    return [value]


def extract_json(data: bytes, stem: str, template: str | None) -> ExtractedDocument:
    warnings: list[str] = []
    try:
        value = json.loads(decode(data, warnings))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ExtractionFailed(f"the JSON cannot be read: {exc}") from None
    rows = [(f"item {i}", _flatten(obj)) for i, obj in enumerate(_objects(value), start=1)]
    return _document("json", rows, template, stem, warnings)


def extract_jsonl(data: bytes, stem: str, template: str | None) -> ExtractedDocument:
    warnings: list[str] = []
    rows = []
    for number, line in enumerate(decode(data, warnings).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rows.append((f"line {number}", _flatten(json.loads(line))))
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ExtractionFailed(f"line {number} is not JSON: {exc}") from None
    return _document("jsonl", rows, template, stem, warnings)

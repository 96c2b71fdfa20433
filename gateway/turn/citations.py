"""Citations: the instruction to cite numbered sources with ``[N]``, the check of the markers a reply
wrote, and the ways a channel shows sources (``Capabilities.citations``).

With ``inline`` and ``footnote`` the prompt's knowledge is numbered (``[1] Title``) and the model is
asked to cite it; a marker naming no source is flagged in the trace and, when verified, removed.
``structured`` leaves the prompt alone (sources travel only in the response payload) and ``none``
turns citations off.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from gateway.core.models import CitationFormat, CitationTrace, PromptMessage, SourceRef

__all__ = ["CITE_INSTRUCTION", "CheckedMarkers", "CitationPolicy", "CitationStyle", "Cited", "check_markers", "cite",
           "deliverable", "drop_markers", "footnotes", "with_instruction"]

# How a channel shows the sources of a reply: beside it (web chat), as a numbered list after it (Telegram,
# Slack), or not at all, with the [N] markers taken out of the text (SMS, voice).
CitationStyle = Literal["structured", "footnote", "drop"]

CITE_INSTRUCTION = (
    "The additional information is numbered [1], [2], and so on. When a sentence of your answer uses one of "
    "these sources, end the sentence with its number in square brackets, e.g. [1] or [1][2]. "
    "Cite only numbers that appear in the additional information."
)
# [1], [1, 2], [1][2]; not an index (a[0]), not a Markdown link label ([1](https://...)).
_MARKER = re.compile(r"(?<!\w)\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\](?!\()")
_CLOSING = re.compile(r"\s|[.,;:!?)\]]")


class CitationPolicy(BaseModel):
    model_config = ConfigDict(frozen=True)

    format: CitationFormat = "structured"
    verify: bool = True

    @property
    def numbered(self) -> bool:
        """The prompt numbers its sources and asks for ``[N]`` markers."""
        return self.format in ("inline", "footnote")


@dataclass(frozen=True)
class CheckedMarkers:
    text: str
    cited: list[int]  # valid source numbers, in order of first mention
    invalid: list[int]  # numbers that name no source


def _rewrite(text: str, keep) -> str:
    """``text`` with each marker's numbers filtered by ``keep``; a marker left empty goes with its spacing."""
    out: list[str] = []
    pos = 0
    for m in _MARKER.finditer(text):
        numbers = [int(n) for n in re.split(r"\s*,\s*", m.group(1))]
        kept = [n for n in numbers if keep(n)]
        before = text[pos:m.start()]
        if kept:
            out.append(before + (m.group(0) if kept == numbers else f"[{', '.join(map(str, kept))}]"))
        else:
            rest = text[m.end():m.end() + 1]
            # "costs 35 euros [7]." -> "costs 35 euros."; a marker between words keeps one space
            out.append(before.rstrip(" \t") if not rest or _CLOSING.match(rest) else before)
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def check_markers(text: str, count: int, *, remove_invalid: bool) -> CheckedMarkers:
    """The ``[N]`` markers of a reply given ``count`` numbered sources."""
    cited: list[int] = []
    invalid: list[int] = []
    for m in _MARKER.finditer(text):
        for n in (int(x) for x in re.split(r"\s*,\s*", m.group(1))):
            bucket = cited if 1 <= n <= count else invalid
            if n not in bucket:
                bucket.append(n)
    if remove_invalid and invalid:
        text = _rewrite(text, lambda n: 1 <= n <= count)
    return CheckedMarkers(text=text, cited=cited, invalid=invalid)


@dataclass(frozen=True)
class Cited:
    text: str
    sources: list[SourceRef]  # each marked ``cited`` when the text refers to it
    trace: CitationTrace | None


def cite(policy: CitationPolicy | None, sources: Sequence[SourceRef], text: str) -> Cited:
    """A reply checked against the sources it was given: with ``none`` (or no policy) it has none."""
    if policy is None or policy.format == "none":
        return Cited(text=text, sources=[], trace=None)
    if not policy.numbered:
        return Cited(text=text, sources=list(sources), trace=CitationTrace(format=policy.format, verify=policy.verify))
    checked = check_markers(text, len(sources), remove_invalid=policy.verify)
    return Cited(
        text=checked.text,
        sources=[s.model_copy(update={"cited": s.n in checked.cited}) for s in sources],
        trace=CitationTrace(format=policy.format, verify=policy.verify, cited=checked.cited,
                            invalid=checked.invalid if policy.verify else []),
    )


def _plain(text: str) -> str:
    return " ".join(text.split()).casefold()


def used_sources(sources: Sequence[SourceRef], texts: Mapping[str, str], reply: str, floor: float) -> list[SourceRef]:
    """The sources a reply shows: a topic it quotes word for word counts as cited; a source neither
    cited nor at ``floor`` (a calibrated score) is dropped. ``texts`` maps a source to its topic text."""
    said = _plain(reply)
    shown = []
    for source in sources:
        text = _plain(texts.get(source.source, ""))
        if not source.cited and len(text) >= 20 and text in said:
            source = source.model_copy(update={"cited": True})
        if source.cited or source.score >= floor:
            shown.append(source)
    return shown


def drop_markers(text: str) -> str:
    return _rewrite(text, lambda n: False)


def footnotes(sources: Sequence[SourceRef]) -> str:
    """``Sources:`` and one ``[n] Title`` line per cited source (its URL after it, when known)."""
    lines = [f"[{s.n}] {s.title}" + (f" ({s.url})" if s.url else "") for s in sources if s.cited]
    return "Sources:\n" + "\n".join(lines) if lines else ""


def deliverable(text: str, sources: Sequence[SourceRef], style: CitationStyle, policy: CitationPolicy | None) -> str:
    """The reply text as a channel sends it; the stored message keeps the text with its markers."""
    if policy is None or not policy.numbered:
        return text
    if style == "drop":
        return drop_markers(text)
    if style == "footnote" and (notes := footnotes(sources)):
        return f"{text.rstrip()}\n\n{notes}"
    return text


def with_instruction(messages: Sequence[PromptMessage]) -> list[PromptMessage]:
    """The prompt with the citation instruction at the end of its system message."""
    out = list(messages)
    if out and out[0].role == "system":
        out[0] = PromptMessage(role="system", content=f"{out[0].content.rstrip()}\n\n{CITE_INSTRUCTION}")
    else:
        out.insert(0, PromptMessage(role="system", content=CITE_INSTRUCTION))
    return out

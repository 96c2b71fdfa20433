"""The ``rag`` attribute text built from selected topics, and its prompt placeholder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

RAG_PLACEHOLDER = "<||rag_placeholder||>"
NO_ADDITIONAL_INFORMATION = "No additional information"


class Titled(Protocol):
    """Anything with a title and a summary: a topic, or a hit a turn carries."""

    @property
    def title(self) -> str: ...

    @property
    def summary(self) -> str: ...


def format_rag(topics: Sequence[Titled], *, numbered: bool = False) -> str:
    """Each topic as ``Title\\nsummary``; ``numbered`` puts ``[1] ``, ``[2] `` … before the titles,
    the numbers a reply cites them by."""
    return "".join(
        f"{f'[{n}] ' if numbered else ''}{topic.title}\n{topic.summary}\n\n---\n\n"
        for n, topic in enumerate(topics, 1)
    )


def replace_rag_placeholder(prompt: str, rag: str) -> str:
    return prompt.replace(RAG_PLACEHOLDER, rag.strip() or NO_ADDITIONAL_INFORMATION)

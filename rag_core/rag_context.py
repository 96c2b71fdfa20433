"""The ``rag`` attribute text built from selected topics, and its prompt placeholder."""

from __future__ import annotations

from collections.abc import Sequence

from rag_core.topic import Topic

RAG_PLACEHOLDER = "<||rag_placeholder||>"
NO_ADDITIONAL_INFORMATION = "No additional information"


def format_rag(topics: Sequence[Topic]) -> str:
    return "".join(f"{topic.title}\n{topic.summary}\n\n---\n\n" for topic in topics)


def replace_rag_placeholder(prompt: str, rag: str) -> str:
    return prompt.replace(RAG_PLACEHOLDER, rag.strip() or NO_ADDITIONAL_INFORMATION)

"""RAG fixtures: the real MiniLM model loaded once, in-memory Qdrant knowledge bases, a small
topic set, and search-LLM test doubles (the only stand-ins: the LLM is an external service)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import QdrantClient

from rag_core import FastEmbedEncoder, KnowledgeBase, Topic
from rag_core.encoders import DenseEncoder
from rag_core.tokenizer import tokenize

MODEL_PATH = Path(__file__).resolve().parents[3] / "shared" / "models" / "all-MiniLM-L6-v2"


@pytest.fixture(scope="session")
def minilm() -> FastEmbedEncoder:
    return FastEmbedEncoder(model_path=MODEL_PATH)


class CountingEncoder:
    """Wraps a real encoder and counts the texts it was asked to embed."""

    def __init__(self, inner: DenseEncoder) -> None:
        self._inner = inner
        self.document_texts: list[str] = []
        self.query_texts: list[str] = []

    @property
    def signature(self) -> str:
        return self._inner.signature

    async def dimension(self) -> int:
        return await self._inner.dimension()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.document_texts.extend(texts)
        return await self._inner.embed_documents(texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        self.query_texts.extend(texts)
        return await self._inner.embed_queries(texts)


def at(day: int) -> datetime:
    return datetime(2024, 1, day, 12, 0, tzinfo=UTC)


SMALL_KB = [
    Topic(
        source="hours",
        title="Opening hours",
        facts=["Open Monday to Friday 9am to 6pm", "Closed on Sundays"],
        summary="The shop opens at 9am and closes at 6pm on weekdays. On Saturday we open 10am-4pm.",
        updated_at=at(1),
    ),
    Topic(
        source="refunds",
        title="Refund policy",
        facts=["Refunds within 30 days with a receipt"],
        summary="Return any unused item within 30 days with the receipt for a full refund.",
        updated_at=at(2),
    ),
    Topic(
        source="pets",
        title="Bringing dogs and other pets",
        facts=["Dogs on a leash are welcome", "No cats in the cafe area"],
        summary="Well-behaved dogs on a leash are welcome in the store. Water bowls are at the door.",
        updated_at=at(3),
    ),
    Topic(
        source="parking",
        title="Parking garage",
        facts=["Parking garage under the building", "Parking costs $3 per hour"],
        summary="Our underground parking garage has 200 spaces. Parking costs $3 per hour.",
        updated_at=at(4),
    ),
    Topic(
        source="bikes",
        title="Bicycle rental",
        facts=["Rent a bicycle for $10 per hour", "Helmets included"],
        summary="Rent a city bicycle at the front desk. Bicycle rental costs $10 per hour.",
        updated_at=at(5),
    ),
    Topic(
        source="gift-cards",
        title="Gift cards",
        facts=["Gift cards from $10 to $500", "Gift cards never expire"],
        summary="Buy gift cards in store or online; they never expire.",
        updated_at=at(6),
    ),
    Topic(
        source="allergens",
        title="Allergy and gluten information",
        facts=["Gluten-free bread available", "All dishes list nuts and dairy"],
        summary="Ask staff for the allergen sheet. Gluten-free bread is baked separately.",
        updated_at=at(7),
    ),
    Topic(
        source="internal-notes",
        title="Staff rota for dogs and parking",
        facts=["Not for customers"],
        summary="Internal staff note about dogs, parking and hours.",
        labels=["staff_only"],
        updated_at=at(8),
    ),
]


@pytest.fixture(params=["fastembed", "none"])
def encoder_kind(request) -> str:
    return request.param


@pytest.fixture
def make_kb(minilm):
    def make(kind: str = "fastembed", encoder: DenseEncoder | None = None) -> KnowledgeBase:
        dense = encoder if encoder is not None else (minilm if kind == "fastembed" else None)
        return KnowledgeBase(QdrantClient(":memory:"), "test", dense=dense)

    return make


@pytest.fixture
async def small_kb(make_kb, encoder_kind) -> KnowledgeBase:
    kb = make_kb(encoder_kind)
    await kb.upsert_many(SMALL_KB)
    return kb


def _section(prompt: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", prompt, re.S)
    assert match, f"prompt has no <{tag}> section"
    return match.group(1)


class OverlapSearchLlm:
    """A search-LLM double that reads the prompt like the real one would: it scores each
    listed article's title and facts by word overlap with the conversation, last user
    message counting double, and answers the three best ids (or "none")."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def structured_generation(self, prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
        self.prompts.append(prompt)
        lines = [line.split(": ", 1)[1] for line in _section(prompt, "ConversationHistory").splitlines()]
        weights: dict[str, float] = {}
        for i, line in enumerate(lines):
            for term in tokenize(line):
                weights[term] = weights.get(term, 0.0) + (2.0 if i == len(lines) - 1 else 1.0)
        scored = []
        for block in _section(prompt, "KnowledgeBaseArticles").split("\n\n---\n\n"):
            fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
            if "article_id" not in fields:
                continue
            terms = set(tokenize(fields["article_title"] + " " + fields["article_facts"]))
            score = sum(weights.get(term, 0.0) for term in terms)
            if score > 0:
                scored.append((score, fields["article_id"]))
        ids = [id_ for _, id_ in sorted(scored, reverse=True)[:3]]
        ids += ["none"] * (3 - len(ids))
        return {"search_result": {f"article_id_{i}": id_ for i, id_ in enumerate(ids, start=1)}}


class ScriptedSearchLlm:
    """A search-LLM double that records prompts and plays back answers or errors in order."""

    def __init__(self, *answers: dict[str, Any] | Exception) -> None:
        self._answers = list(answers)
        self.prompts: list[str] = []
        self.schemas: list[dict[str, Any]] = []

    async def structured_generation(self, prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
        self.prompts.append(prompt)
        self.schemas.append(schema)
        answer = self._answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def answer(*ids: str) -> dict[str, Any]:
    padded = [*ids, "none", "none", "none"][:3]
    return {"search_result": {f"article_id_{i}": id_ for i, id_ in enumerate(padded, start=1)}}

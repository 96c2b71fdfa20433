"""The knowledge-base topic: the unit that is indexed, retrieved and injected into prompts."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rag_core.errors import TopicValidationError

RAG_CONTEXT_LABEL = "rag_context"
# Title, summary and facts together. Every turn that retrieves a topic tokenizes and prompts it, so
# one huge topic slows every conversation; the gateway passes SWITCHBOARD_MAX_TOPIC_CHARS.
MAX_TOPIC_CHARS = 100_000
_POINT_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "switchboard:kb-topic")
# A source a person or an import gives: it is an id in URLs (/api/kb/topics/{source}), prompts and logs,
# so ASCII letters, digits and . _ - : # @ only (document chunks are ``doc:<id>#<n>``).
SOURCE_CHARS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:#@-]*")
SOURCE_RULE = "ASCII letters, digits and . _ - : # @ only, starting with a letter or digit"


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Topic(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(min_length=1, max_length=256)
    title: str = Field(min_length=1, max_length=1000)
    facts: list[str] = Field(default_factory=list)
    summary: str = ""
    labels: list[str] = Field(default_factory=lambda: [RAG_CONTEXT_LABEL])
    # A document chunk's neighbours (``doc:<id>#<n-1>`` / ``#<n+1>``), so a reader can widen to adjacent chunks.
    prev_source: str | None = None
    next_source: str | None = None
    created_at: datetime = Field(default_factory=_utcnow)
    updated_at: datetime = Field(default_factory=_utcnow)

    @field_validator("source", "title", mode="before")
    @classmethod
    def _strip_required(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value

    @field_validator("facts", "labels")
    @classmethod
    def _drop_blank(cls, values: list[str]) -> list[str]:
        return [v.strip() for v in values if v.strip()]

    @field_validator("created_at", "updated_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value if value.tzinfo else value.replace(tzinfo=UTC)

    @property
    def point_id(self) -> str:
        return topic_point_id(self.source)

    @property
    def in_rag_pool(self) -> bool:
        return RAG_CONTEXT_LABEL in self.labels

    def content_hash(self, encoder_signature: str) -> str:
        """Hash of everything that decides the vectors, including which encoders made them
        and whether the topic is in the retrieval pool (only pool topics carry vectors)."""
        blob = json.dumps(
            [encoder_signature, self.in_rag_pool, self.title, self.facts, self.summary],
            ensure_ascii=False,
        )
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ScoredTopic(BaseModel):
    model_config = ConfigDict(frozen=True)

    topic: Topic
    score: float
    # Each retrieval leg's own raw score for this topic ("bm25", "dense", "fused", "rerank"); absent: not found by it.
    legs: dict[str, float] = Field(default_factory=dict)


def topic_point_id(source: str) -> str:
    return str(uuid.uuid5(_POINT_NAMESPACE, source))


def parse_topic(data: Mapping[str, Any], *, max_chars: int = MAX_TOPIC_CHARS) -> Topic:
    """Validate loose input into a Topic; the error names the first offending field.

    Input over ``max_chars`` (title, summary and facts together) is refused; topics already
    stored are read with ``Topic.model_validate`` and never refused for their size."""
    try:
        topic = Topic.model_validate(dict(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "topic"
        raise TopicValidationError(field, first["msg"]) from exc
    if not SOURCE_CHARS.fullmatch(topic.source):
        raise TopicValidationError("source", f"{SOURCE_RULE} (got {topic.source!r})")
    size = len(topic.title) + len(topic.summary) + sum(len(fact) for fact in topic.facts)
    if size > max_chars:
        raise TopicValidationError(
            "topic", f"{size} characters in title, summary and facts; the limit is {max_chars}"
        )
    return topic

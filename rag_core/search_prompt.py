"""The search-assistant prompt and answer schema of ``llm_select``, as the seed defines them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from rag_core.errors import StructuredOutputError
from rag_core.retrieval import ChatTurn, SearchRequest
from rag_core.topic import Topic

HISTORY_MESSAGES = 20
HISTORY_MAX_CHARS = 10_000
NO_ARTICLE = "none"

_ROLE_LABEL = {"user": "User", "agent": "Agent"}
_ID_FIELD = {"type": "string", "description": "article_id of a matching article, or 'none'"}

SEARCH_RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "search_result": {
            "type": "object",
            "properties": {f"article_id_{i}": dict(_ID_FIELD) for i in (1, 2, 3)},
            "required": ["article_id_1", "article_id_2", "article_id_3"],
            "additionalProperties": False,
        }
    },
    "required": ["search_result"],
    "additionalProperties": False,
}

_PROMPT = """You are the search assistant.
**Task:**
Find the 1-3 articles from <KnowledgeBaseArticles> that are the best
semantic match for the user's topics in the **entire** <ConversationHistory>.
**CRITICAL RULES:**
1. Matches for the **last user message** are the most important and
MUST be listed first.
2. If multiple articles cover the same topic, select only the most
recent one (check `article_last_updated`).
3. Provide up to three relevant article IDs.
<ConversationMeta>
{meta}
</ConversationMeta>
<ConversationHistory>
{history}
</ConversationHistory>
<KnowledgeBaseArticles>
{articles}
</KnowledgeBaseArticles>
"""


def format_article(topic: Topic) -> str:
    return (
        f"article_title: {topic.title}\n"
        f"article_facts: [{', '.join(topic.facts)}]\n"
        f"article_last_updated: {topic.updated_at.isoformat()}\n"
        f"article_id: {topic.source}\n\n---\n\n"
    )


def format_articles(topics: Sequence[Topic]) -> str:
    """The listing the search LLM sees, newest ``updated_at`` first as in the seed."""
    ordered = sorted(topics, key=lambda t: (t.updated_at, t.source), reverse=True)
    return "".join(format_article(topic) for topic in ordered)


def format_history(turns: Sequence[ChatTurn]) -> str:
    """The last 20 messages, oldest first, capped at 10,000 characters (newest kept)."""
    lines: list[str] = []
    size = 0
    for turn in reversed(turns[-HISTORY_MESSAGES:]):
        line = f"{_ROLE_LABEL[turn.role]}: {turn.text}"
        size += len(line) + 1
        if size > HISTORY_MAX_CHARS and lines:
            break
        lines.append(line)
    return "\n".join(reversed(lines))


def build_search_prompt(request: SearchRequest, topics: Sequence[Topic]) -> str:
    return _PROMPT.format(
        meta=request.conversation_meta,
        history=format_history(request.conversation),
        articles=format_articles(topics),
    )


class _SelectedIds(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    article_id_1: str
    article_id_2: str
    article_id_3: str


class _SearchAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    search_result: _SelectedIds


def parse_selection(answer: Any) -> list[str]:
    """Article ids in answer order, without ``none`` and without repeats."""
    try:
        parsed = _SearchAnswer.model_validate(answer)
    except ValidationError as exc:
        raise StructuredOutputError(f"search answer does not match the schema: {exc}") from exc
    ids = [id_.strip() for id_ in parsed.search_result.model_dump().values()]
    return [id_ for id_ in dict.fromkeys(ids) if id_ and id_.lower() != NO_ARTICLE]

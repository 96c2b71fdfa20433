"""LLM query shaping (seed 002/004): a follow-up rewritten into a standalone question, and paraphrased
variants of a question for multi-query retrieval. Both return None when the model fails, so the caller
searches with what it has."""

from __future__ import annotations

from typing import Any

from rag_core.errors import SwitchboardError
from rag_core.generation import StructuredGenerator
from rag_core.retrieval import SearchRequest

MAX_VARIANTS = 3
_REWRITE_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"],
    "additionalProperties": False,
}
_VARIANTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"queries": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_VARIANTS}},
    "required": ["queries"], "additionalProperties": False,
}


def _conversation(request: SearchRequest) -> str:
    lines = [f"{'User' if t.role == 'user' else 'Agent'}: {t.text[:500]}" for t in request.history[-6:]]
    return "\n".join([*lines, f"User: {request.query[:1000]}"])


async def _ask(generator: StructuredGenerator, prompt: str, schema: dict[str, Any], key: str) -> Any:
    """The answer's ``key`` field, or None when the model failed or answered something else."""
    try:
        answer = await generator.structured_generation(prompt, schema)
    except SwitchboardError:
        return None
    return answer.get(key) if isinstance(answer, dict) else None


async def standalone_query(generator: StructuredGenerator, request: SearchRequest) -> str | None:
    prompt = (
        "Rewrite the user's last message as one standalone search query for a knowledge base, carrying over "
        "whatever the earlier conversation says that the last message leaves implicit. Answer with JSON "
        '{"query": "..."}.\n\n<Conversation>\n' + _conversation(request) + "\n</Conversation>"
    )
    query = await _ask(generator, prompt, _REWRITE_SCHEMA, "query")
    return query.strip()[:1000] if isinstance(query, str) and query.strip() else None


async def paraphrases(generator: StructuredGenerator, request: SearchRequest) -> list[str] | None:
    prompt = (
        f"Write up to {MAX_VARIANTS} different search queries that would find the knowledge-base articles "
        "answering the user's last message in this conversation. Answer with JSON "
        '{"queries": ["...", ...]}.\n\n<Conversation>\n' + _conversation(request) + "\n</Conversation>"
    )
    queries = await _ask(generator, prompt, _VARIANTS_SCHEMA, "queries")
    if not isinstance(queries, list):
        return None
    return [q.strip()[:1000] for q in queries if isinstance(q, str) and q.strip()][:MAX_VARIANTS] or None

"""Two model-judged checks an agent can switch on (structured generation, validated against a schema):

- **Multi-hop query refinement** (``enableMultihopQueryRefinement``): the retrieved chunks are judged
  against the question; when they do not answer it, the judge writes a better search query and
  retrieval runs again — at most ``MAX_HOPS`` times.
- **Hallucination check** (``enableHallucinationCheck``): the answer is judged against the retrieved
  chunks; an answer with unsupported claims is regenerated once with those claims as feedback.

A judge that fails (the model errs or answers off-schema) never fails the invocation: the check is
recorded as not done, with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from gateway.core.errors import LLMError
from gateway.turn.llm import LLMClient
from rag_core.errors import StructuredOutputError
from rag_core.retrieval import Hit

log = logging.getLogger(__name__)

MAX_HOPS = 2
RELEVANCE = {
    "type": "object", "additionalProperties": False, "required": ["relevant", "refined_query"],
    "properties": {"relevant": {"type": "boolean"}, "refined_query": {"type": "string"}},
}
SUPPORT = {
    "type": "object", "additionalProperties": False, "required": ["supported", "unsupported_claims"],
    "properties": {"supported": {"type": "boolean"},
                   "unsupported_claims": {"type": "array", "items": {"type": "string"}}},
}


async def _judge(llm: LLMClient, schema: dict, prompt: str) -> dict | str:
    """The judge's verdict, or why there is none (a failed judge is reported, never raised)."""
    try:
        return await llm.structured_generation(prompt, schema)
    except (LLMError, StructuredOutputError) as exc:
        return str(exc)


def context_of(hits: list[Hit]) -> str:
    return "\n\n---\n\n".join(f"[{h.topic.source}] {h.topic.title}\n{h.topic.summary}".strip() for h in hits)


@dataclass
class Refinement:
    hits: list[Hit]
    queries: list[str] = field(default_factory=list)  # the refined queries that were searched
    note: str | None = None  # why the check could not run, when it could not


async def refine(llm: LLMClient, question: str, hits: list[Hit],
                 search: Callable[[str], Awaitable[list[Hit]]]) -> Refinement:
    """Search again with a refined query while the judge finds the chunks irrelevant (bounded)."""
    outcome = Refinement(hits=hits)
    for _ in range(MAX_HOPS):
        verdict = await _judge(llm, RELEVANCE, (
            "You judge search results for a question. Say whether the results contain what is needed to "
            "answer it. If they do not, write one better, self-contained search query.\n\n"
            f"Question: {question}\n\nResults:\n{context_of(outcome.hits) or '(none)'}"))
        if isinstance(verdict, str):
            outcome.note = f"relevance judge failed: {verdict}"
            return outcome
        query = verdict["refined_query"].strip()
        if verdict["relevant"] or not query or query in outcome.queries:
            return outcome
        log.info("multi-hop: the results were judged irrelevant; searching again for %r", query[:120])
        outcome.queries.append(query)
        found = await search(query)
        known = {h.topic.source for h in outcome.hits}
        outcome.hits = [*found, *(h for h in outcome.hits if h.topic.source not in {f.topic.source for f in found})]
        if not found or {h.topic.source for h in found} <= known:
            return outcome
    return outcome


@dataclass
class Verdict:
    checked: bool
    supported: bool = True
    claims: list[str] = field(default_factory=list)
    note: str | None = None


async def judge_answer(llm: LLMClient, question: str, hits: list[Hit], answer: str) -> Verdict:
    verdict = await _judge(llm, SUPPORT, (
        "You check an answer against the only facts it may use. List every claim in the answer that the "
        "context does not support (saying it does not know is always supported).\n\n"
        f"Context:\n{context_of(hits) or '(none)'}\n\nQuestion: {question}\n\nAnswer: {answer}"))
    if isinstance(verdict, str):
        return Verdict(checked=False, note=f"hallucination judge failed: {verdict}")
    claims = [c for c in verdict["unsupported_claims"] if c.strip()]
    return Verdict(checked=True, supported=bool(verdict["supported"]) and not claims, claims=claims)


def feedback(claims: list[str]) -> str:
    listed = "\n".join(f"- {c}" for c in claims)
    return ("Your previous answer made claims the context does not support:\n" f"{listed}\n"
            "Answer again using only the context; where it says nothing, say you do not know.")

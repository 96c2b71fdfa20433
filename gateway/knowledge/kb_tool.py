"""``query_knowledge``: the one tool agentic retrieval gives the model.

``action: "list"`` names the knowledge bases this agent may search, with their descriptions;
``action: "query"`` searches one (``kb_id``) or several (``kb_ids``, in parallel) with
``query_text`` and returns the best ``top_k`` of the merged results, each annotated with its
``knowledge_base_id``. A knowledge base outside the agent's configuration is refused inside the
tool — whatever a prompt injection makes the model ask for, it cannot reach another agent's
knowledge. When some knowledge bases fail and others answer, the result holds both ``results``
and ``failed_kbs``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence

from gateway.core.errors import GatewayError
from gateway.core.models import ToolCallTrace
from rag_core.errors import RagError
from rag_core.retrieval import ChatTurn, Hit

log = logging.getLogger(__name__)

NAME = "query_knowledge"
DEFAULT_TOP_K = 5
MAX_TOP_K = 20
MAX_QUERY_CHARS = 1000
AGENTIC_STRATEGY = "hybrid"

# The retrieval policy goes in the tool's description *and* the system prompt: the description is
# read when the model weighs calling the tool; the system prompt is what makes it call it at all.
POLICY = (
    "Answer questions about the business only from its knowledge bases. Before answering any question "
    "about products, prices, hours, policies or anything the business offers, call query_knowledge: "
    'first with {"action": "list"} if you do not know which knowledge base fits, then with '
    '{"action": "query", "kb_ids": [...], "query_text": "..."} (a short, self-contained search query). '
    "If the results do not answer the question, say you do not know; never invent facts. "
    "Small talk needs no search."
)

SPEC = {
    "type": "function",
    "function": {
        "name": NAME,
        "description": "Search the business's knowledge bases. " + POLICY,
        "parameters": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["list", "query"],
                           "description": "list: the knowledge bases you may search; query: search them"},
                "kb_id": {"type": "string", "description": "one knowledge base to search"},
                "kb_ids": {"type": "array", "items": {"type": "string"},
                           "description": "several knowledge bases, searched in parallel"},
                "query_text": {"type": "string", "description": "what to search for"},
                "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K,
                          "description": f"how many results, merged across knowledge bases (default {DEFAULT_TOP_K})"},
            },
            "required": ["action"],
        },
    },
}


class KnowledgeTool:
    def __init__(self, knowledge, allowed: Sequence[str] = ()) -> None:  # knowledge: gateway.knowledge.search.Knowledge
        self.knowledge = knowledge
        self.allowed = tuple(allowed)  # empty: every knowledge base of this agent

    async def scope(self) -> list[str]:
        names = await self.knowledge.bases.names()
        return [n for n in names if n in self.allowed] if self.allowed else names

    async def run(self, raw_arguments: str, history: Sequence[ChatTurn] = ()) -> tuple[str, ToolCallTrace]:
        """The tool's answer (JSON text for the model) and what the trace records."""
        t0 = time.perf_counter()
        try:
            arguments = json.loads(raw_arguments or "{}")
            if not isinstance(arguments, dict):
                raise ValueError("arguments must be a JSON object")
        except ValueError as exc:
            return self._refused({}, f"arguments are not valid JSON: {exc}", t0)
        action = arguments.get("action")
        if action == "list":
            return await self._list(arguments, t0)
        if action == "query":
            return await self._query(arguments, history, t0)
        return self._refused(arguments, 'action must be "list" or "query"', t0)

    async def _list(self, arguments: dict, t0: float) -> tuple[str, ToolCallTrace]:
        bases = []
        for name in await self.scope():
            info = await self.knowledge.bases.info(name)
            bases.append({"kb_id": name, "description": info.description or f"the {name!r} knowledge base"})
        log.info("query_knowledge list: %d knowledge base(s)", len(bases))
        trace = ToolCallTrace(name=NAME, arguments=arguments, result_count=len(bases),
                              knowledge_bases=[b["kb_id"] for b in bases], ms=_ms(t0))
        return json.dumps({"knowledge_bases": bases}), trace

    async def _query(self, arguments: dict, history: Sequence[ChatTurn], t0: float) -> tuple[str, ToolCallTrace]:
        requested = arguments.get("kb_ids") or ([arguments["kb_id"]] if arguments.get("kb_id") else [])
        if not isinstance(requested, list) or not all(isinstance(k, str) for k in requested):
            return self._refused(arguments, "kb_ids must be a list of knowledge base ids", t0)
        text = arguments.get("query_text")
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_QUERY_CHARS:
            return self._refused(arguments, f"query_text: 1 to {MAX_QUERY_CHARS} characters", t0)
        try:
            top_k = max(1, min(MAX_TOP_K, int(arguments.get("top_k") or DEFAULT_TOP_K)))
        except (TypeError, ValueError):
            return self._refused(arguments, "top_k must be a whole number", t0)
        scope = await self.scope()
        outside = [k for k in requested if k not in scope]
        if outside:  # never searched, whatever the model was told
            log.warning("query_knowledge refused knowledge base(s) outside the agent's scope: %s", outside)
            return self._refused(arguments, f"not allowed: {', '.join(outside)}; allowed: {', '.join(scope)}", t0)
        names = list(dict.fromkeys(requested)) or scope
        log.info("query_knowledge query %r in %s (top_k %d)", text[:80], names, top_k)
        answers = await asyncio.gather(*(self._one(name, text, history, top_k) for name in names),
                                       return_exceptions=True)
        merged: list[tuple[str, Hit]] = []
        failed = []
        for name, answer in zip(names, answers, strict=True):
            if isinstance(answer, BaseException):
                log.warning("query_knowledge: knowledge base %r failed: %s", name, answer)
                failed.append(name)
                continue
            log.info("query_knowledge: %r gave %d result(s)", name, len(answer))
            merged.extend((name, hit) for hit in answer)
        merged.sort(key=lambda pair: pair[1].score, reverse=True)
        best = merged[:top_k]
        result: dict = {"results": [{
            "knowledge_base_id": name, "source": hit.topic.source, "title": hit.topic.title,
            "facts": hit.topic.facts, "text": hit.topic.summary, "score": round(hit.score, 4),
        } for name, hit in best]}
        if failed:
            result["failed_kbs"] = failed
        if failed and not best:
            result["error"] = "every knowledge base failed; answer without it and say so"
        log.info("query_knowledge summary: %d result(s) from %d knowledge base(s), %d failed",
                 len(best), len(names) - len(failed), len(failed))
        trace = ToolCallTrace(name=NAME, arguments=arguments, result_count=len(best), knowledge_bases=names,
                              failed_kbs=failed, sources=[hit.topic.source for _, hit in best], ms=_ms(t0))
        return json.dumps(result, ensure_ascii=False), trace

    async def _one(self, name: str, text: str, history: Sequence[ChatTurn], top_k: int) -> list[Hit]:
        try:
            # Fusion only: the model itself is the selector here (no second LLM picks among the results).
            found = await self.knowledge.search(text, history, strategy=AGENTIC_STRATEGY, k=top_k, kbs=[name])
        except (GatewayError, RagError) as exc:
            raise RuntimeError(str(exc)) from exc
        return list(found.hits)

    def _refused(self, arguments: dict, problem: str, t0: float) -> tuple[str, ToolCallTrace]:
        return (json.dumps({"error": problem}),
                ToolCallTrace(name=NAME, arguments=arguments, error=problem, ms=_ms(t0)))


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 1)


class ToolSupport:
    """Whether the reply model can call tools: the setting at start, switched off for good the first
    time the server refuses a request because it carried tools (then retrieval goes back inline —
    it never silently disappears)."""

    def __init__(self, supported: bool) -> None:
        self.supported = supported

    def refused(self, why: str) -> None:
        if self.supported:
            log.warning("the model cannot call tools (%s): agentic retrieval falls back to inline retrieval", why)
        self.supported = False

"""How an agent version answers one call, as the parts the turn pipeline plugs in (``TurnPlan``).

The pipeline runs the turn as it runs every channel's (dedup, the conversation and its lock, the
handoff gate, memory, delivery, the trace); an agent call brings its own parts:

- retrieval: the version's knowledge bases, ``limit``/``rerankerTopN``, ``hybridSearch``, labels,
  multi-hop refinement, adjacent chunks and the prompt-injection screen — or, with
  ``retrievalMode: agentic``, none (the model searches itself through ``query_knowledge``);
- the prompt: the business's prompt template with its sections, live data and calendar — the same as on
  every channel — with the agent's own ``systemPrompt``, when it has one, as its instructions;
- the reply: the version's model and inference options (``AgentResponder``);
- the output checks: the hallucination check (one regeneration with the judge's feedback) and the
  guardrails on the answer (``finish``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from gateway.agents.checks import feedback, judge_answer, refine
from gateway.agents.definitions import AgentConfig
from gateway.agents.guardrails import Guardrails
from gateway.core.models import PromptMessage, Role, SourceRef, ToolCallTrace
from gateway.core.settings import Settings
from gateway.knowledge.agentic import AgenticResponder
from gateway.knowledge.citing import UrlOf, policy_of, source_refs
from gateway.knowledge.kb_tool import POLICY, KnowledgeTool, ToolSupport
from gateway.knowledge.rag_preparation import retrieval_trace
from gateway.turn.citations import CitationPolicy
from gateway.turn.llm import CallOptions, LLMClient
from gateway.turn.pipeline import Turn
from gateway.turn.ports import PromptAssembler
from gateway.turn.responders import KnowledgeHit, LLMResponder, OfflineResponder, Reply, ReplyRequest
from rag_core.adjacent import widen
from rag_core.rag_context import format_rag
from rag_core.retrieval import ChatTurn, Hit
from rag_core.topic import RAG_CONTEXT_LABEL

__all__ = ["AgentPlan", "AgentResponder", "knowledge_hits"]


def knowledge_hits(hits: Sequence[Hit]) -> list[KnowledgeHit]:
    return [KnowledgeHit(source=h.topic.source, title=h.topic.title, summary=h.topic.summary, score=h.score,
                         facts=tuple(h.topic.facts)) for h in hits]


class AgentResponder:
    """The reply with the version's model and options; the model's own searches when agentic; the
    offline responder when no model is configured."""

    def __init__(self, settings: Settings, llm: LLMClient | None, knowledge, tool_support: ToolSupport,
                 config: AgentConfig) -> None:
        self.settings = settings
        self.llm = llm
        self.knowledge = knowledge  # gateway.knowledge.search.Knowledge
        self.tool_support = tool_support
        self.config = config

    def options(self) -> CallOptions:
        return self.config.call_options()

    async def reply(self, request: ReplyRequest) -> Reply:
        if self.llm is None:
            return await OfflineResponder(self.settings).reply(request)
        request = replace(request, options=self.options())  # its searches (agentic) too
        plain = LLMResponder(self.llm)
        if request.agentic:
            tool = KnowledgeTool(self.knowledge, self.config.knowledge_bases)
            return await AgenticResponder(self.llm, plain, tool, self.tool_support,
                                          self.settings.agent_max_tool_calls).reply(request)
        return await plain.reply(request)


class AgentPlan:
    """One call's parts (``gateway.turn.ports.TurnPlan``), and what they found for the answer: the hits
    behind ``sourceNodes``, the sources as numbered before the reply was cited, and ``customOutputs``."""

    raises_llm_errors = True  # the caller sees a failed model call (502), not the channels' fallback text

    def __init__(self, settings: Settings, config: AgentConfig, guard: Guardrails, llm: LLMClient | None,
                 knowledge, tool_support: ToolSupport, url_of: UrlOf, prompts: PromptAssembler) -> None:
        self.settings = settings
        self.config = config
        self.guard = guard
        self.llm = llm
        self.knowledge = knowledge  # gateway.knowledge.search.Knowledge
        self.url_of = url_of
        self.agentic = config.retrieval_mode == "agentic" and llm is not None and tool_support.supported
        self.preparers = [self]
        self.prompts = prompts  # the business's template, as every channel's turn assembles it
        self.responder = AgentResponder(settings, llm, knowledge, tool_support, config)
        self.memory_since: datetime | None = None  # set by the caller once the conversation is known
        # An answer that may still change (guardrails, the hallucination check) is sent whole, once final.
        self.holds_stream = bool(guard.names & {"pii-redaction", "blocked-terms"}) or config.enable_hallucination_check
        self.hits: list[Hit] = []
        self.refs: list[SourceRef] = []
        self.outputs: dict = {}

    @property
    def rag_mode(self) -> str:
        return "agentic" if self.agentic else ("multihop" if self.outputs.get("multihop", {}).get("queries")
                                               else "normal")

    def _citations(self) -> CitationPolicy:
        default = policy_of(self.settings)
        return self.config.citations.over(default) if self.config.citations is not None else default

    # -- context (the plan is its own context preparer) ----------------------------------------
    async def prepare(self, turn: Turn) -> None:
        turn.kbs = list(self.config.knowledge_bases)
        instructions = self.config.own_instructions()
        if instructions is not None:
            turn.prompt_variables["business_instructions"] = instructions
        policy = self._citations()
        if self.agentic:
            turn.agentic, turn.rag = True, POLICY
            # The model saw no numbered context: its sources are listed, not cited.
            turn.citations = CitationPolicy(format="structured", verify=policy.verify) if policy.numbered else policy
            return
        own = turn.user_message.id
        history = [ChatTurn(role="user" if m.role is Role.USER else "agent", text=m.text)
                   for m in turn.recent if m.id != own]
        self.hits = await self._retrieve(turn, turn.user_message.text, history)
        turn.rag = format_rag([h.topic for h in self.hits], numbered=policy.numbered)  # as a channel's turn has it
        turn.hits = knowledge_hits(self.hits)
        turn.citations = policy
        self.refs = await source_refs(turn.hits, self.url_of)
        turn.sources = list(self.refs)

    async def _retrieve(self, turn: Turn, question: str, history: list[ChatTurn]) -> list[Hit]:
        config, guard, trace = self.config, self.guard, turn.trace
        strategy = "hybrid" if config.hybrid_search else "bm25"
        # The retrieval pool is the rag_context topics; other labels narrow it (any of them), so search wider.
        narrowed = set(config.labels) - {RAG_CONTEXT_LABEL}

        async def search(query: str) -> list[Hit]:
            found = await self.knowledge.search(query, history, strategy=strategy,
                                                k=config.limit * (4 if narrowed else 1),
                                                kbs=config.knowledge_bases or None,
                                                controls=config.retrieval_controls)
            if trace.retrieval is None:
                trace.retrieval = retrieval_trace(found)
            kept = [h for h in found.hits if not narrowed or narrowed & set(h.topic.labels)][:config.limit]
            kept = kept[:config.reranker_top_n]  # `limit` retrieved, the best `rerankerTopN` of them kept
            return [h for h in kept if guard.context_allowed(f"{h.topic.title}\n{h.topic.summary}")]

        hits = await search(question)
        if config.enable_multihop_query_refinement and self.llm is not None:
            refined = await refine(self.llm, question, hits, search)
            hits = refined.hits[:config.limit * (1 + len(refined.queries))]
            self.outputs["multihop"] = {"queries": refined.queries, "note": refined.note}
            trace.checks["multihop"] = (refined.note or f"{len(refined.queries)} refined search(es): "
                                        + "; ".join(refined.queries) if refined.queries or refined.note
                                        else "the first results were judged relevant")
        if config.adjacent_chunk_range:
            hits = await widen(hits, config.adjacent_chunk_range, config.adjacent_chunk_merge, self._fetch)
        if guard.screened and trace.retrieval is not None:
            trace.retrieval.skipped = f"{guard.screened} retrieved chunk(s) left out by prompt-injection-screen"
        return hits

    async def _fetch(self, sources) -> list:
        """Topics by source from the agent's knowledge bases (a chunk's neighbours live in its own)."""
        names = self.config.knowledge_bases or await self.knowledge.bases.names()
        found: dict = {}
        for name in names:
            for topic in await self.knowledge.bases.instance(name).get_many([s for s in sources if s not in found]):
                found[topic.source] = topic
        return list(found.values())

    # -- output checks ---------------------------------------------------------------------------
    async def finish(self, turn: Turn, prompt: Sequence[PromptMessage], reply: Reply) -> Reply:
        if self.config.enable_hallucination_check and self.llm is not None and not self.agentic:
            reply = await self._checked(turn, list(prompt), reply)
        reply.text = self.guard.outgoing(reply.text)
        if self.agentic:
            self.hits = await self._tool_hits(reply.tool_calls)
            turn.hits = knowledge_hits(self.hits)
            self.refs = await source_refs(turn.hits, self.url_of)
            turn.sources = list(self.refs)
        self.outputs["guardrails"] = {"applied": sorted(self.guard.names), "screened": self.guard.screened}
        return reply

    async def _checked(self, turn: Turn, prompt: list[PromptMessage], reply: Reply) -> Reply:
        """The hallucination check: an unsupported answer is regenerated once with the judge's feedback."""
        assert self.llm is not None
        verdict = await judge_answer(self.llm, turn.user_message.text, self.hits, reply.text)
        regenerated = False
        if verdict.checked and not verdict.supported:
            again = [*prompt, PromptMessage(role="assistant", content=reply.text),
                     PromptMessage(role="user", content=feedback(verdict.claims))]
            first = reply
            reply = await self.responder.reply(ReplyRequest(prompt=again))
            reply.usage.total_tokens += first.usage.total_tokens
            regenerated = True
        self.outputs["hallucinationCheck"] = {"checked": verdict.checked, "supported": verdict.supported,
                                              "unsupportedClaims": verdict.claims, "regenerated": regenerated,
                                              "note": verdict.note}
        turn.trace.checks["hallucination"] = verdict.note or (
            "supported" if verdict.supported else f"regenerated: {'; '.join(verdict.claims)}")
        return reply

    async def _tool_hits(self, calls: list[ToolCallTrace]) -> list[Hit]:
        """The topics the model's searches returned, as source nodes (scores are not carried by the tool)."""
        sources = list(dict.fromkeys(s for c in calls for s in c.sources))
        topics = await self.knowledge.kb.get_many(sources) if sources else []
        return [Hit(topic=t, score=1.0 / (i + 1)) for i, t in enumerate(topics)]

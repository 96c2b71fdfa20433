"""One invocation of an agent version: memory, retrieval, the agent's system prompt, the reply.

The caller's ``messages`` are the conversation (the last one is the user's question). With a
session id the conversation lives on the server — stored like any conversation (channel ``api``,
visible in the console, ended after the inactivity timeout) — and a caller may send only the new
question; earlier messages it sends are stored once, when the session has none yet. Retrieval
follows the version's configuration (knowledge bases, ``limit``, ``hybridSearch``), or, with
``retrievalMode: agentic``, the model searches itself through ``query_knowledge``. The prompt is
the agent's ``systemPrompt`` with ``{context_str}`` and ``{query_str}`` filled, then the history.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from gateway.agents.checks import feedback, judge_answer, refine
from gateway.agents.definitions import AgentConfig, AgentVersion
from gateway.agents.guardrails import Guardrails
from gateway.conversation.memory import Memory
from gateway.conversation.sessions import Sessions
from gateway.conversation.store import RedisStore
from gateway.core.errors import BadRequest
from gateway.core.models import (
    DeliveryStatus,
    InboundMessage,
    Message,
    PromptMessage,
    Role,
    SourceRef,
    StageTiming,
    TokenUsage,
    ToolCallTrace,
    TurnTrace,
    utcnow,
)
from gateway.core.settings import Settings
from gateway.knowledge.agentic import AgenticResponder
from gateway.knowledge.citing import document_urls, policy_of, source_refs
from gateway.knowledge.kb_tool import POLICY, KnowledgeTool, ToolSupport
from gateway.knowledge.rag_preparation import retrieval_trace
from gateway.turn.citations import CitationPolicy, cite, with_instruction
from gateway.turn.llm import CallOptions, LLMClient
from gateway.turn.responders import KnowledgeHit, OfflineResponder, Reply, ReplyRequest
from rag_core.adjacent import widen
from rag_core.retrieval import ChatTurn, Hit
from rag_core.topic import RAG_CONTEXT_LABEL

CHANNEL = "api"
ROLES = {"user": Role.USER, "assistant": Role.AGENT}
Delta = Callable[[str], Awaitable[None]]


@dataclass
class SourceNode:
    doc_id: str
    chunk_id: str
    score: float
    text: str
    n: int = 0  # the number the prompt showed it by ([n]); the stored message's sources carry the same
    title: str = ""
    url: str | None = None
    cited: bool = False


@dataclass
class InvokeResult:
    text: str
    model: str
    sources: list[SourceNode]
    rag_mode: str
    usage: TokenUsage
    turn_id: str
    conversation_id: str
    created_at: int = field(default_factory=lambda: int(time.time()))
    outputs: dict = field(default_factory=dict)  # what the checks and guardrails did, for customOutputs


def _doc_of(source: str) -> str:
    """A document chunk's document id (``doc:<id>#<n>``); any other topic is its own document."""
    return source[4:].split("#", 1)[0] if source.startswith("doc:") else source


def source_nodes(hits: list[Hit], refs: list[SourceRef] | None = None) -> list[SourceNode]:
    """Scores in 0–1: the best hit is 1 and the others keep their ratio to it (fused scores are relative).
    ``refs`` are the sources stored on the reply (numbered, cited or not), one per hit, in order."""
    top = max((h.score for h in hits), default=0.0) or 1.0
    nodes = [SourceNode(doc_id=_doc_of(h.topic.source), chunk_id=h.topic.source,
                        score=round(max(0.0, h.score) / top, 4), text=h.topic.summary or h.topic.title, n=n,
                        title=h.topic.title) for n, h in enumerate(hits, 1)]
    by_n = {r.n: r for r in refs or ()}
    for node in nodes:
        if (ref := by_n.get(node.n)) is not None:
            node.url, node.cited = ref.url, ref.cited
    return nodes


def _knowledge_hits(hits: list[Hit]) -> list[KnowledgeHit]:
    return [KnowledgeHit(source=h.topic.source, title=h.topic.title, summary=h.topic.summary, score=h.score,
                         facts=tuple(h.topic.facts)) for h in hits]


class AgentRunner:
    def __init__(self, settings: Settings, store: RedisStore, sessions: Sessions, memory: Memory, knowledge,
                 llm: LLMClient | None, tool_support: ToolSupport) -> None:
        self.settings = settings
        self.store = store
        self.sessions = sessions
        self.memory = memory
        self.knowledge = knowledge  # gateway.knowledge.search.Knowledge
        self.llm = llm
        self.tool_support = tool_support
        self._urls = document_urls(lambda: knowledge.bases.documents)

    async def invoke(self, version: AgentVersion, config: AgentConfig, messages: list[dict],
                     session_id: str | None, on_delta: Delta | None = None) -> InvokeResult:
        if not messages or messages[-1].get("role") != "user":
            raise BadRequest("messages: the last message must have role \"user\"")
        for i, m in enumerate(messages):
            if m.get("role") not in ROLES or not isinstance(m.get("content"), str) or not m["content"].strip():
                raise BadRequest(f"messages[{i}]: role \"user\" or \"assistant\" with non-empty text content")
            if len(m["content"]) > self.settings.max_message_chars:
                raise BadRequest(f"messages[{i}]: longer than {self.settings.max_message_chars} characters")
        guard = Guardrails(config.guardrails, self.settings.blocked_terms)
        messages = [{**m, "content": guard.incoming(m["content"])} for m in messages]  # before anything stores it
        t0 = time.perf_counter()
        agent = version.definition
        question = messages[-1]["content"]
        identity = f"api:{agent.id}:{session_id or uuid.uuid4()}"
        persona = await self.store.resolve_persona(identity, agent.name)
        inbound = InboundMessage(channel=CHANNEL, external_user_id=identity, external_message_id=uuid.uuid4().hex,
                                 identity=identity, text=question, thread=agent.id)
        conversation, _ = await self.sessions.open(persona, inbound)
        stored = await self.memory.get_memory(persona, count=self.settings.memory_count,
                                              max_chars=self.settings.memory_max_chars, channels=[CHANNEL],
                                              since=conversation.started_at)
        if not stored:  # a new session (or none): the caller's earlier messages are the history
            for m in messages[:-1]:
                await self.store.add_message(Message(conversation_id=conversation.id, persona_id=persona.id,
                                                     role=ROLES[m["role"]], channel=CHANNEL, text=m["content"]))
            stored = await self.memory.get_memory(persona, count=self.settings.memory_count,
                                                  max_chars=self.settings.memory_max_chars, channels=[CHANNEL],
                                                  since=conversation.started_at)
        user = Message(conversation_id=conversation.id, persona_id=persona.id, role=Role.USER, channel=CHANNEL,
                       text=question)
        trace = TurnTrace(conversation_id=conversation.id, persona_id=persona.id, channel=CHANNEL,
                          user_message_id=user.id)
        user.turn_id = trace.turn_id
        await self.store.add_message(user)
        history = [ChatTurn(role="user" if m.role is Role.USER else "agent", text=m.text) for m in stored]
        agentic = config.retrieval_mode == "agentic" and self.llm is not None and self.tool_support.supported
        policy = self._citations(config)
        hits, context, outputs = await self._retrieve(config, question, history, guard, trace, agentic,
                                                      numbered=policy.numbered)
        trace.stages.append(StageTiming(stage="context", ms=round((time.perf_counter() - t0) * 1000, 3)))
        system = config.system_prompt.replace("{context_str}", context or "No additional information.")
        system = system.replace("{query_str}", question)
        prompt = [PromptMessage(role="system", content=system),
                  *(PromptMessage(role="user" if m.role is Role.USER else "assistant", content=m.text) for m in stored),
                  PromptMessage(role="user", content=question)]
        if policy.numbered and hits and not agentic:
            prompt = with_instruction(prompt)
        # An answer that may still change (guardrails, the hallucination check) is sent whole, once final.
        hold = bool(guard.names & {"pii-redaction", "blocked-terms"}) or config.enable_hallucination_check
        reply = await self._reply(config, prompt, hits, agentic, None if hold else on_delta)
        if config.enable_hallucination_check and self.llm is not None and not agentic:
            reply = await self._checked(config, question, prompt, hits, reply, trace, outputs)
        reply.text = guard.outgoing(reply.text)
        if hold and on_delta is not None:
            await on_delta(reply.text)
        if agentic:
            hits = await self._tool_hits(reply.tool_calls)
            if policy.numbered:  # the model saw no numbered context: its sources are listed, not cited
                policy = CitationPolicy(format="structured", verify=policy.verify)
        cited = cite(policy, await source_refs(_knowledge_hits(hits), self._urls), reply.text)
        reply.text, trace.citations = cited.text, cited.trace
        agent_message = Message(conversation_id=conversation.id, persona_id=persona.id, role=Role.AGENT,
                                channel=CHANNEL, text=reply.text, turn_id=trace.turn_id,
                                delivery=DeliveryStatus.DELIVERED, sources=cited.sources)
        trace.prompt, trace.reply, trace.model, trace.usage = prompt, reply.text, reply.model, reply.usage
        trace.responder, trace.tool_calls = reply.responder, reply.tool_calls
        trace.agent_message_id = agent_message.id
        trace.total_ms = round((time.perf_counter() - t0) * 1000, 3)
        conversation.last_activity_at = utcnow()
        await self.store.add_message(agent_message)
        await self.store.finish_turn(agent_message, conversation, trace, self.sessions.activity_key)
        rag_mode = "agentic" if agentic else ("multihop" if outputs.get("multihop", {}).get("queries") else "normal")
        return InvokeResult(text=reply.text, model=reply.model or self._model(config),
                            sources=source_nodes(hits, cited.sources), rag_mode=rag_mode, usage=reply.usage,
                            turn_id=trace.turn_id, conversation_id=conversation.id,
                            outputs={**outputs, "guardrails": {"applied": sorted(guard.names),
                                                               "screened": guard.screened}})

    def _citations(self, config: AgentConfig) -> CitationPolicy:
        default = policy_of(self.settings)
        return config.citations.over(default) if config.citations is not None else default

    async def _retrieve(self, config: AgentConfig, question: str, history: list[ChatTurn], guard: Guardrails,
                        trace: TurnTrace, agentic: bool, numbered: bool = False) -> tuple[list[Hit], str, dict]:
        """The hits and the context text (the tool policy when the model searches itself)."""
        if agentic:
            return [], POLICY, {}
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
        outputs: dict = {}
        if config.enable_multihop_query_refinement and self.llm is not None:
            refined = await refine(self.llm, question, hits, search)
            hits = refined.hits[:config.limit * (1 + len(refined.queries))]
            outputs["multihop"] = {"queries": refined.queries, "note": refined.note}
            trace.checks["multihop"] = (refined.note or f"{len(refined.queries)} refined search(es): "
                                        + "; ".join(refined.queries) if refined.queries or refined.note
                                        else "the first results were judged relevant")
        if config.adjacent_chunk_range:
            hits = await widen(hits, config.adjacent_chunk_range, config.adjacent_chunk_merge, self._fetch(config))
        if guard.screened and trace.retrieval is not None:
            trace.retrieval.skipped = f"{guard.screened} retrieved chunk(s) left out by prompt-injection-screen"
        context = "\n\n---\n\n".join(f"{f'[{n}] ' if numbered else ''}{h.topic.title}\n{h.topic.summary}".strip()
                                    for n, h in enumerate(hits, 1))
        return hits, context, outputs

    def _fetch(self, config: AgentConfig):
        """Topics by source from the agent's knowledge bases (a chunk's neighbours live in its own)."""

        async def fetch(sources) -> list:
            names = config.knowledge_bases or await self.knowledge.bases.names()
            found: dict = {}
            for name in names:
                for topic in await self.knowledge.bases.instance(name).get_many(
                        [s for s in sources if s not in found]):
                    found[topic.source] = topic
            return list(found.values())

        return fetch

    async def _checked(self, config: AgentConfig, question: str, prompt: list[PromptMessage], hits: list[Hit],
                       reply: Reply, trace: TurnTrace, outputs: dict) -> Reply:
        """The hallucination check: an unsupported answer is regenerated once with the judge's feedback."""
        assert self.llm is not None
        verdict = await judge_answer(self.llm, question, hits, reply.text)
        regenerated = False
        if verdict.checked and not verdict.supported:
            again = [*prompt, PromptMessage(role="assistant", content=reply.text),
                     PromptMessage(role="user", content=feedback(verdict.claims))]
            first = reply
            reply = await self._reply(config, again, hits, False, None)
            reply.usage.total_tokens += first.usage.total_tokens
            regenerated = True
        outputs["hallucinationCheck"] = {"checked": verdict.checked, "supported": verdict.supported,
                                         "unsupportedClaims": verdict.claims, "regenerated": regenerated,
                                         "note": verdict.note}
        trace.checks["hallucination"] = verdict.note or (
            "supported" if verdict.supported else f"regenerated: {'; '.join(verdict.claims)}")
        return reply

    def _model(self, config: AgentConfig) -> str:
        return config.llm_model_id or self.settings.llm_model

    async def _reply(self, config: AgentConfig, prompt: list[PromptMessage], hits: list[Hit], agentic: bool,
                     on_delta: Delta | None) -> Reply:
        knowledge_hits = _knowledge_hits(hits)
        if self.llm is None:
            return await OfflineResponder(self.settings).reply(
                ReplyRequest(prompt=prompt, hits=knowledge_hits, on_delta=on_delta))
        options = CallOptions(model=config.llm_model_id, temperature=config.inference_config.temperature,
                              max_tokens=config.inference_config.max_tokens,
                              max_retries=config.inference_config.max_retries)
        if agentic:
            tool = KnowledgeTool(self.knowledge, config.knowledge_bases)
            responder = AgenticResponder(self.llm, _PlainReply(self.llm, options), tool, self.tool_support,
                                         self.settings.agent_max_tool_calls)
            return await responder.reply(ReplyRequest(prompt=prompt, on_delta=on_delta, agentic=True))
        return await _PlainReply(self.llm, options).reply(ReplyRequest(prompt=prompt, on_delta=on_delta))

    async def _tool_hits(self, calls: list[ToolCallTrace]) -> list[Hit]:
        """The topics the model's searches returned, as source nodes (scores are not carried by the tool)."""
        sources = list(dict.fromkeys(s for c in calls for s in c.sources))
        topics = await self.knowledge.kb.get_many(sources) if sources else []
        return [Hit(topic=t, score=1.0 / (i + 1)) for i, t in enumerate(topics)]


class _PlainReply:
    """The model's reply with the agent's call options (model, temperature, length, retries)."""

    def __init__(self, llm: LLMClient, options: CallOptions) -> None:
        self.llm = llm
        self.options = options

    async def reply(self, request: ReplyRequest) -> Reply:
        model = self.options.model or self.llm.model
        if request.on_delta is None:
            done = await self.llm.complete(request.prompt, self.options)
            return Reply(text=done.text, responder="llm", model=model, usage=done.usage)
        usage = TokenUsage()
        parts: list[str] = []
        async for piece in self.llm.stream(request.prompt, usage, self.options):
            parts.append(piece)
            await request.on_delta(piece)
        return Reply(text="".join(parts), responder="llm", model=model, usage=usage)

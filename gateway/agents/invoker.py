"""One invocation of an agent version, run by the one turn pipeline with the agent's parts.

The caller's ``messages`` are the conversation (the last one is the user's question). With a
session id the conversation lives on the server — stored like any conversation (channel ``api``,
visible in the console, ended after the inactivity timeout) — and a caller may send only the new
question; earlier messages it sends are stored once, when its conversation starts. Retrieval, model
and output checks are the version's (``gateway.agents.plan``); the prompt is the business's template
with its sections, live data and calendar, as on every channel. Everything else is the pipeline's, as
for every channel: the conversation's turn lock, the handoff gate (a conversation an operator took
over is held: no model call, the operator's replies come back with the session's next call), memory,
the trace the console shows.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta

from gateway.agents.definitions import AgentConfig, AgentVersion
from gateway.agents.guardrails import Guardrails
from gateway.agents.plan import AgentPlan
from gateway.conversation.store import RedisStore
from gateway.core.errors import BadRequest
from gateway.core.models import DeliveryStatus, InboundMessage, Message, Role, SourceRef, TokenUsage, ToolCallTrace
from gateway.core.settings import Settings
from gateway.knowledge.citing import document_urls
from gateway.knowledge.kb_tool import ToolSupport
from gateway.tools.service import ToolSources
from gateway.turn.llm import LLMClient
from gateway.turn.pipeline import Turn, TurnOutcome, TurnPipeline
from gateway.turn.ports import Capabilities, DeliveryReport
from gateway.turn.responders import ToolEvent, ToolListener
from gateway.turn.tools import BUILTIN_TOOLS, with_builtins
from rag_core.retrieval import Hit

# The API key of the request being served (set where the key is checked): the turn's cost is the key's.
calling_key: ContextVar[str | None] = ContextVar("calling_key", default=None)

__all__ = ["CAPABILITIES", "CHANNEL", "AgentInvoker", "AnswerSink", "InvokeResult", "OperatorReply", "SourceNode",
           "calling_key",
           "source_nodes"]

CHANNEL = "api"
# What an API caller's answer can carry: streamed text with structured sources; an operator may take
# the conversation over from the console (the call is then held and their replies come back later).
CAPABILITIES = Capabilities(max_length=1_000_000, markup="markdown", streaming=True, handoff=True,
                            citations="structured")
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
class OperatorReply:
    """A person's reply from the console, given back with the session's next call."""

    text: str
    author: str | None
    created_at: int


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
    held: str | None = None  # why the agent did not answer (an operator has the conversation), or None
    operator_replies: list[OperatorReply] = field(default_factory=list)
    tool_calls: list[ToolCallTrace] = field(default_factory=list)  # the turn's tool calls, in order


def _doc_of(source: str) -> str:
    """A document chunk's document id (``doc:<id>#<n>``); any other topic is its own document."""
    return source[4:].split("#", 1)[0] if source.startswith("doc:") else source


def source_nodes(hits: list[Hit], refs: list[SourceRef] | None = None) -> list[SourceNode]:
    """Scores in 0–1: the best hit is 1 and the others keep their ratio to it (fused scores are relative).
    ``refs`` are the sources of the reply (numbered, cited or not), matched to the hits by number."""
    top = max((h.score for h in hits), default=0.0) or 1.0
    nodes = [SourceNode(doc_id=_doc_of(h.topic.source), chunk_id=h.topic.source,
                        score=round(max(0.0, h.score) / top, 4), text=h.topic.summary or h.topic.title, n=n,
                        title=h.topic.title) for n, h in enumerate(hits, 1)]
    by_n = {r.n: r for r in refs or ()}
    for node in nodes:
        if (ref := by_n.get(node.n)) is not None:
            node.url, node.cited = ref.url, ref.cited
    return nodes


class AnswerSink:
    """The HTTP answer as a turn's sink: the reply's deltas go to ``on_delta`` when the caller streams;
    a reply held back until final (guardrails, a check) goes out whole when delivered."""

    channel = CHANNEL

    def __init__(self, on_delta: Delta | None = None, on_tool: ToolListener | None = None) -> None:
        self.on_delta = on_delta
        self.on_tool = on_tool
        self.streaming = on_delta is not None
        self.streamed = False

    async def tool_event(self, event: ToolEvent) -> None:
        if self.on_tool is not None:
            await self.on_tool(event)

    async def delta(self, text: str) -> None:
        assert self.on_delta is not None
        self.streamed = True
        await self.on_delta(text)

    async def deliver(self, text: str) -> DeliveryReport:
        if self.on_delta is not None and not self.streamed and text:
            await self.on_delta(text)
        return DeliveryReport(delivered=True)


class AgentInvoker:
    def __init__(self, settings: Settings, store: RedisStore, pipeline: TurnPipeline, knowledge,
                 llm: LLMClient | None, tool_support: ToolSupport) -> None:
        self.settings = settings
        self.store = store
        self.pipeline = pipeline
        self.knowledge = knowledge  # gateway.knowledge.search.Knowledge
        self.llm = llm
        self.tool_support = tool_support
        self._urls = document_urls(lambda: knowledge.bases.documents)
        self.tools: ToolSources | None = None  # the agents' tools (issue 40), set by the services

    def _checked(self, messages: list[dict], guard: Guardrails) -> list[dict]:
        if not messages or messages[-1].get("role") != "user":
            raise BadRequest("messages: the last message must have role \"user\"")
        for i, m in enumerate(messages):
            if m.get("role") not in ROLES or not isinstance(m.get("content"), str) or not m["content"].strip():
                raise BadRequest(f"messages[{i}]: role \"user\" or \"assistant\" with non-empty text content")
            if len(m["content"]) > self.settings.max_message_chars:
                raise BadRequest(f"messages[{i}]: longer than {self.settings.max_message_chars} characters")
        return [{**m, "content": guard.incoming(m["content"])} for m in messages]  # before anything stores it

    async def invoke(self, version: AgentVersion, config: AgentConfig, messages: list[dict],
                     session_id: str | None, on_delta: Delta | None = None, caller: str | None = None,
                     on_tool: ToolListener | None = None) -> InvokeResult:
        """``caller``: who the end user is, as the caller names them (OpenAI's ``user``): the persona's name in
        the console; without it the persona is named after the agent."""
        guard = Guardrails(config.guardrails, self.settings.blocked_terms)
        messages = self._checked(messages, guard)
        agent = version.definition
        identity = f"api:{agent.id}:{session_id or uuid.uuid4()}"
        name = (caller or "").strip()[:200] or agent.name  # the persona's name in the console
        inbound = InboundMessage(channel=CHANNEL, external_user_id=identity, external_message_id=uuid.uuid4().hex,
                                 identity=identity, text=messages[-1]["content"], thread=agent.id,
                                 display_name=name, agent=f"{agent.id}@{version.version_id}")
        plan = AgentPlan(self.settings, config, guard, self.llm, self.knowledge, self.tool_support, self._urls,
                         self.pipeline.prompts)
        turn = await self.pipeline.accept(inbound, plan=plan)
        assert turn is not None  # a fresh message id is never a duplicate
        turn.trace.api_key = calling_key.get()  # its tokens and cost are counted under the key (insight)
        if turn.started and len(messages) > 1:  # a new conversation: the caller's earlier messages are its start
            await self._seed(turn, messages[:-1])
        plan.memory_since = turn.conversation.started_at  # memory is this conversation's
        if self.tools is not None and config.tools:  # the version's tools, with its model (gateway.turn.tools)
            names = [t.name for t in config.tools]
            turn.tools = with_builtins(await self.tools.for_turn(
                [n for n in names if n not in BUILTIN_TOOLS], plan.responder.options(),
                frozenset(t.name for t in config.tools if t.confirm)), names)
        try:
            outcome = await self.pipeline.run(turn, AnswerSink(on_delta, on_tool))
        except BaseException:
            await self.store.save_trace(turn.trace)  # what it got to, and the model's error, for the console
            raise
        return await self._result(outcome, plan, config)

    async def _seed(self, turn: Turn, earlier: list[dict]) -> None:
        """Store the caller's earlier messages just before the question, in order: the conversation starts
        with the first of them."""
        first = turn.user_message.created_at - timedelta(milliseconds=len(earlier))
        pipe = self.store.redis.pipeline(transaction=False)  # one round trip, however many there are
        for i, m in enumerate(earlier):
            self.store.add_message_into(pipe, Message(
                conversation_id=turn.conversation.id, persona_id=turn.persona.id, role=ROLES[m["role"]],
                channel=CHANNEL, text=m["content"], created_at=first + timedelta(milliseconds=i),
                delivery=DeliveryStatus.DELIVERED))
        if first < turn.conversation.started_at:
            turn.conversation.started_at = first
            self.store.save_conversation_into(pipe, turn.conversation)
        await pipe.execute()

    async def _result(self, outcome: TurnOutcome, plan: AgentPlan, config: AgentConfig) -> InvokeResult:
        turn = outcome.turn
        trace = turn.trace
        # Held for an operator, the turn composed nothing: what they said is in the window read with its lock.
        recent = (turn.fetched or []) if outcome.suppressed else turn.recent
        cited = {s.n: s.cited for s in turn.sources}
        refs = [r.model_copy(update={"cited": cited.get(r.n, False)}) for r in plan.refs]
        return InvokeResult(
            text=outcome.reply.text if not outcome.suppressed else "",
            model=outcome.reply.model or config.llm_model_id or self.settings.llm_model,
            sources=source_nodes(plan.hits, refs) if not outcome.suppressed else [],
            rag_mode=plan.rag_mode, usage=outcome.reply.usage, turn_id=trace.turn_id,
            conversation_id=turn.conversation.id, outputs=plan.outputs,
            held=trace.suppressed if outcome.suppressed else None,
            operator_replies=_operator_replies(recent, turn.user_message),
            tool_calls=list(trace.tool_calls) if not outcome.suppressed else [],
        )


def _operator_replies(recent: list[Message], own: Message) -> list[OperatorReply]:
    """The operators' replies since the caller's previous message (they answered it, or wrote first)."""
    before = [m for m in recent if m.id != own.id and m.created_at <= own.created_at]
    start = max((i for i, m in enumerate(before) if m.role is Role.USER), default=-1) + 1
    return [OperatorReply(text=m.text, author=m.author, created_at=int(m.created_at.timestamp()))
            for m in before[start:] if m.role is Role.OPERATOR]

"""Agentic retrieval: the reply model gets ``query_knowledge`` and decides when and where to search.

A bounded loop: the model answers or asks for tool calls; each call runs (its JSON result goes back
as a ``tool`` message) until it answers, or until ``SWITCHBOARD_AGENT_MAX_TOOL_CALLS`` calls were
made — then it must answer with what it has. Text the model streams around its tool calls reaches
the user as it comes. Every call is recorded for the turn trace. If the server refuses a request
because it carries tools, the model cannot call them: this turn searches before replying (inline)
and so do all later ones (``ToolSupport``) — retrieval never silently disappears.
"""

from __future__ import annotations

import json
import logging

from gateway.core.errors import LLMError
from gateway.core.models import PromptMessage, TokenUsage, ToolCallTrace
from gateway.knowledge.kb_tool import NAME, SPEC, KnowledgeTool, ToolSupport
from gateway.turn.llm import LLMClient, ToolsUnsupported, model_of
from gateway.turn.responders import Reply, ReplyRequest, Responder
from rag_core.rag_context import format_rag

log = logging.getLogger(__name__)


class AgenticResponder:
    def __init__(self, llm: LLMClient, inner: Responder, tool: KnowledgeTool, support: ToolSupport,
                 max_calls: int) -> None:
        self.llm = llm
        self.inner = inner  # the plain reply, for turns that are not agentic
        self.tool = tool
        self.support = support
        self.max_calls = max_calls

    async def reply(self, request: ReplyRequest) -> Reply:
        if not request.agentic:
            return await self.inner.reply(request)
        tool = self.tool if request.kbs is None else KnowledgeTool(self.tool.knowledge, request.kbs)
        messages: list[dict] = [{"role": m.role, "content": m.content} for m in request.prompt]
        calls: list[ToolCallTrace] = []
        usage = TokenUsage()
        while True:
            final = len(calls) >= self.max_calls
            try:
                step = await self.llm.tool_step(messages, [SPEC], request.on_delta, final=final,
                                                options=request.options)
            except ToolsUnsupported as exc:
                self.support.refused(exc.message)
                return await self._inline(request, tool, calls, str(exc.message))
            _add(usage, step.usage)
            if not step.calls or final:
                if not step.text.strip():
                    raise LLMError("language model returned no text")
                log.info("agentic turn answered after %d tool call(s)", len(calls))
                model = model_of(request.options, self.llm.model)
                return Reply(text=step.text, responder="llm", model=model, usage=usage, tool_calls=calls)
            messages.append({"role": "assistant", "content": step.text or None, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in step.calls]})
            for call in step.calls:
                log.info("agentic tool call %s %s", call.name, call.arguments[:200])
                if call.name != NAME or len(calls) >= self.max_calls:
                    problem = (f"unknown tool {call.name!r}" if call.name != NAME
                               else f"tool call limit ({self.max_calls}) reached; answer now")
                    result, trace = _refusal(call.name, problem)
                else:
                    result, trace = await tool.run(call.arguments)
                calls.append(trace)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

    async def _inline(self, request: ReplyRequest, tool: KnowledgeTool, calls: list[ToolCallTrace],
                      why: str) -> Reply:
        """The model refused tools: search with the user's message, put the result in the prompt, reply."""
        question = next((m.content for m in reversed(request.prompt) if m.role == "user"), "")
        scope = await tool.scope()
        found = await tool.knowledge.search(question, kbs=scope or None)
        context = format_rag(found.topics)
        calls.append(ToolCallTrace(name="inline_fallback", arguments={"query_text": question[:200]},
                                   result_count=len(found.hits), knowledge_bases=scope,
                                   sources=[h.topic.source for h in found.hits],
                                   error=f"{why}; searched before replying instead"))
        prompt = [*request.prompt[:-1], PromptMessage(role="system", content=f"Knowledge base context:\n{context}"),
                  *request.prompt[-1:]]
        reply = await self.inner.reply(ReplyRequest(prompt=prompt, hits=request.hits, on_delta=request.on_delta))
        reply.tool_calls = calls
        return reply


def _refusal(name: str, problem: str) -> tuple[str, ToolCallTrace]:
    return json.dumps({"error": problem}), ToolCallTrace(name=name, error=problem)


def _add(total: TokenUsage, more: TokenUsage) -> None:
    total.prompt_tokens += more.prompt_tokens
    total.completion_tokens += more.completion_tokens
    total.total_tokens += more.total_tokens

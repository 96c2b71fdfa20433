"""What an agent is: a named RAG configuration that other software invokes over HTTP, versioned.

JSON in and out is camelCase, as the agent API's callers write it; Python reads snake_case. Every
change to a definition makes a new immutable ``AgentVersion``; ``latest`` is the newest.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from gateway.agents.guardrails import NAMES as GUARDRAILS
from gateway.core.models import CitationFormat
from gateway.turn.citations import CitationPolicy
from gateway.turn.llm import CallOptions
from rag_core.controls import RetrievalControls

DEFAULT_SYSTEM_PROMPT = (
    "Context information is below.\n---------------------\n{context_str}\n---------------------\n"
    "Given the context information and not prior knowledge, answer the query. If the context does not "
    "answer it, say you do not know.\nQuery: {query_str}\nAnswer: "
)
PLACEHOLDERS = ("{context_str}", "{query_str}")

__all__ = ["DEFAULT_SYSTEM_PROMPT", "PLACEHOLDERS", "AgentConfig", "AgentCreate", "AgentDefinition", "AgentVersion",
           "CitationsConfig", "InferenceConfig", "ToolChoice"]


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class InferenceConfig(_Camel):
    max_tokens: int = Field(default=1024, ge=1, le=32_000)
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    max_retries: int = Field(default=2, ge=0, le=10)


class CitationsConfig(_Camel):
    """``citations: {format, verify}``: a field left out is the settings' (SWITCHBOARD_CITATIONS_*)."""

    format: CitationFormat | None = None
    verify: bool | None = None

    def over(self, default: CitationPolicy) -> CitationPolicy:
        return CitationPolicy(format=self.format or default.format,
                              verify=default.verify if self.verify is None else self.verify)


class ToolChoice(_Camel):
    """A tool the agent may call (issue 40): ``crm.book_table``, or ``crm.*`` for every tool of a source, or a
    built-in one (``handoff``: ask for a person)."""

    name: str = Field(pattern=r"^([a-z0-9][a-z0-9_-]{0,39}\.\S{1,200}|handoff)$")
    confirm: bool = False  # proposed to the customer first, called on their yes in the next turn


class AgentConfig(_Camel):
    knowledge_bases: list[str] = Field(default_factory=list)  # empty: every knowledge base
    labels: list[str] = Field(default_factory=lambda: ["rag_context"])  # our equivalent of the seed's query filter
    limit: int = Field(default=50, ge=1, le=200)  # chunks retrieved; ``rerankerTopN`` of them are kept
    hybrid_search: bool = True
    adjacent_chunk_range: int = Field(default=0, ge=0, le=5)
    adjacent_chunk_merge: bool = False
    reranker_top_n: int = Field(default=13, ge=1, le=100)
    enable_hallucination_check: bool = False
    enable_multihop_query_refinement: bool = False
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    llm_model_id: str | None = Field(default=None, min_length=1)  # None: SWITCHBOARD_LLM_MODEL
    inference_config: InferenceConfig = Field(default_factory=InferenceConfig)
    guardrails: list[str] = Field(default_factory=list)
    retrieval_mode: Literal["inline", "agentic"] = "inline"
    vision: bool = False  # issue 44: the model sees images; a photo in a chat reaches it as an image part
    # Retrieval controls (rag_core.controls, snake_case names as in settings and POST /api/kb/search) that
    # override the settings for this agent, e.g. {"relevance_threshold": 0.4, "selection_strategy": "mmr"}.
    retrieval_controls: dict[str, Any] = Field(default_factory=dict)

    def call_options(self) -> CallOptions:
        """Its model (None: ``SWITCHBOARD_LLM_MODEL``) and inference settings, as the agent API calls it."""
        inference = self.inference_config
        return CallOptions(model=self.llm_model_id, temperature=inference.temperature,
                           max_tokens=inference.max_tokens, max_retries=inference.max_retries)

    def channel_call_options(self) -> CallOptions | None:
        """The same for a channel turn, where an inference setting left at its default (``InferenceConfig``) is
        the gateway's (``SWITCHBOARD_LLM_TEMPERATURE``, no length cap, the client's retries): a definition
        that sets neither a model nor any of them answers exactly as the settings say (None)."""
        own, default = self.inference_config, InferenceConfig()
        options = CallOptions(
            model=self.llm_model_id,
            temperature=None if own.temperature == default.temperature else own.temperature,
            max_tokens=None if own.max_tokens == default.max_tokens else own.max_tokens,
            max_retries=None if own.max_retries == default.max_retries else own.max_retries)
        return None if options == CallOptions() else options

    @field_validator("retrieval_controls")
    @classmethod
    def _known_controls(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            RetrievalControls().merged(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ValueError(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
        return {k: v for k, v in value.items() if v is not None}
    citations: CitationsConfig | None = None  # None: the settings decide
    tools: list[ToolChoice] = Field(default_factory=list, max_length=128)  # GET /api/tool-sources lists them

    @field_validator("tools")
    @classmethod
    def _tools_once(cls, value: list[ToolChoice]) -> list[ToolChoice]:
        names = [t.name for t in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} named more than once")
        return value

    @field_validator("guardrails")
    @classmethod
    def _known_guardrails(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - GUARDRAILS)
        if unknown:
            raise ValueError(f"unknown {', '.join(unknown)}; GET /v1/guardrails lists them")
        return list(dict.fromkeys(value))

    @field_validator("system_prompt")
    @classmethod
    def _placeholders(cls, value: str) -> str:
        missing = [p for p in PLACEHOLDERS if p not in value]
        if missing:
            raise ValueError(f"must contain {' and '.join(missing)}")
        return value

    def own_instructions(self) -> str | None:
        """The agent's own ``systemPrompt`` as the instructions part of the business's prompt template, which
        every agent answers with on every entry (its ``{context_str}`` is the knowledge the template shows,
        ``{query_str}`` the customer's message); None with the default prompt: the console's instructions."""
        if self.system_prompt == DEFAULT_SYSTEM_PROMPT:
            return None
        return (self.system_prompt.replace("{context_str}", "(the knowledge-base context given below)")
                .replace("{query_str}", "(the customer's latest message)"))


def _now() -> datetime:
    return datetime.now(UTC)


class AgentDefinition(_Camel):
    id: str
    name: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    display_name: str = Field(default="", max_length=200)
    description: str = Field(default="", max_length=2000)
    agent_type: Literal["rag"] = "rag"
    notes: str = Field(default="", max_length=4000)
    config: AgentConfig = Field(default_factory=AgentConfig)
    created_at: datetime = Field(default_factory=_now)
    updated_at: datetime = Field(default_factory=_now)
    latest_version_id: str = ""


class AgentVersion(_Camel):
    """A definition as it was at one change; written once, never updated."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    version_id: str
    agent_id: str
    created_at: datetime = Field(default_factory=_now)
    definition: AgentDefinition


class AgentCreate(_Camel):
    """``POST /v1/agents``: everything but the ids and times."""

    name: str
    display_name: str = ""
    description: str = ""
    agent_type: Literal["rag"] = "rag"
    notes: str = ""
    config: AgentConfig = Field(default_factory=AgentConfig)

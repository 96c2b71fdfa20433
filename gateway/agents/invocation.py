"""The body of ``invoke`` and ``invoke-stream``: the messages, extra guardrails and the overrides a
call may make of its version's configuration, checked strictly.

Unknown fields are refused (422, naming them) rather than ignored: a caller who sends
``inferenceConfig`` or ``systemPrompt`` believes it changed something. Booleans are JSON booleans
(``"no"`` is not false), numbers are numbers. Scoping overrides only narrow (``gateway.agents.scope``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from gateway.agents.definitions import AgentConfig, CitationsConfig
from gateway.agents.scope import narrowed
from gateway.core.errors import BadRequest, InvalidInput

__all__ = ["OVERRIDES", "Invocation", "configured"]


class Invocation(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True)

    messages: list[dict[str, Any]]
    guardrails: list[str] | None = None
    # Overrides of the version's config for this call (None: the version's own).
    hybrid_search: bool | None = None
    limit: int | None = None
    reranker_top_n: int | None = None
    adjacent_chunk_range: int | None = None
    adjacent_chunk_merge: bool | None = None
    enable_hallucination_check: bool | None = None
    enable_multihop_query_refinement: bool | None = None
    knowledge_bases: list[str] | None = None
    labels: list[str] | None = None
    retrieval_mode: Literal["inline", "agentic"] | None = None
    citations: CitationsConfig | None = None

    @classmethod
    def parse(cls, body: Any) -> Invocation:
        """400 for a body of the wrong shape or type, 422 naming every unknown field."""
        if not isinstance(body, dict):
            raise BadRequest('body: {"messages": [{"role": "user", "content": "..."}], ...}')
        unknown = [k for k in body if k not in _FIELDS]
        if unknown:
            raise InvalidInput(f"unknown field(s) {', '.join(unknown)}: an invocation may set "
                               f"{', '.join(sorted(_FIELDS))} (the agent's definition holds the rest; "
                               "PATCH /v1/agents/{id} changes it)")
        try:
            return cls.model_validate(body, strict=True)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "body"
            raise BadRequest(f"{where}: {first['msg']}") from None


_FIELDS = {field.alias or name for name, field in Invocation.model_fields.items()}
OVERRIDES = sorted(_FIELDS - {"messages", "guardrails"})


def configured(agent: AgentConfig, call: Invocation) -> AgentConfig:
    """The version's config with this call's overrides (narrowing only) and extra guardrails."""
    overrides = narrowed(agent, call.model_dump(exclude={"messages", "guardrails"}, exclude_none=True))
    if "citations" in overrides:
        overrides["citations"] = call.citations
    try:
        return AgentConfig.model_validate({**agent.model_dump(), **overrides,
                                           "guardrails": [*agent.guardrails, *(call.guardrails or [])]})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadRequest(f"{to_camel('.'.join(map(str, first['loc'])))}: {first['msg']}") from None

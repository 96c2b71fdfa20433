"""Callers of the agent API authenticate with an API key, never the admin token.

``authorize_caller`` runs first in every caller endpoint of one agent (describe, invoke,
invoke-stream): ``Authorization: Bearer sbk_...``; 401 for a missing, unknown or revoked key —
before the agent is looked up, so a caller without a key learns nothing of which agents exist —
then 403 for an agent the key may not call (or that does not exist: the same answer, so a key
cannot list other agents either), 429 with ``Retry-After`` past the key's limit. The agent may be
named by its id or its name.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from gateway.agents.api_keys import ApiKey, refusal
from gateway.agents.definitions import AgentDefinition, AgentVersion
from gateway.agents.invoker import calling_key
from gateway.agents.store import LATEST
from gateway.core.errors import Forbidden, NotFound, Unauthorized
from gateway.http.auth import bearer_token, services_of

__all__ = ["Caller", "authorize_caller"]


@dataclass(frozen=True)
class Caller:
    key: ApiKey
    agent: AgentDefinition
    version: AgentVersion | None = None  # the version asked for as stored, if read with the caller (check it)


async def authorize_caller(request: Request, agent_ref: str, version_id: str = LATEST) -> Caller:
    """The caller's key and the agent (``agent_ref``: its id or name) if the key may call it now, with the
    version ``version_id`` names: one round trip (``CallerReader``), answered in the order above."""
    services = services_of(request)
    token = bearer_token(request)
    if not token:
        raise Unauthorized("an API key is required: Authorization: Bearer sbk_...")
    read = await services.callers.read(token, agent_ref, version_id)
    record = read.key
    if record is None:
        raise Unauthorized("unknown or revoked API key")
    if read.agent is None:
        if agent_ref in record.agents:  # the key's own agent was deleted: say so
            raise NotFound(f"no agent {agent_ref!r} (by id or name); GET /v1/agents lists them")
        raise Forbidden(refusal(agent_ref))
    if read.agent.id not in record.agents:
        raise Forbidden(refusal(agent_ref))
    limit = record.rate_limit_per_min
    if read.used is not None and 0 < limit < read.used:
        raise services.api_keys.rate.refuse(limit, read.ttl_ms)
    calling_key.set(record.id)  # the invocation's tokens and cost count under this key (insight)
    return Caller(key=record, agent=read.agent, version=read.version)

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
from gateway.agents.definitions import AgentDefinition
from gateway.core.errors import Forbidden, NotFound
from gateway.http.auth import bearer_token, services_of

__all__ = ["Caller", "authorize_caller"]


@dataclass(frozen=True)
class Caller:
    key: ApiKey
    agent: AgentDefinition


async def authorize_caller(request: Request, agent_ref: str) -> Caller:
    """The caller's key and the agent (``agent_ref``: its id or name) if the key may call it now."""
    services = services_of(request)
    record = await services.api_keys.identify(bearer_token(request))
    try:
        agent = await services.agents.find(agent_ref)
    except NotFound:
        if agent_ref in record.agents:  # the key's own agent was deleted: say so
            raise
        raise Forbidden(refusal(agent_ref)) from None
    return Caller(key=await services.api_keys.admit(record, agent.id, shown_as=agent_ref), agent=agent)

"""Callers of the agent API authenticate with an API key, never the admin token.

``require_agent_key`` is the dependency every caller endpoint of one agent uses (describe, invoke,
invoke-stream): ``Authorization: Bearer sbk_...``; 401 for a missing, unknown or revoked key, 403
for a key not scoped to the path's ``agent_id``, 429 with ``Retry-After`` past the key's limit.
"""

from __future__ import annotations

from fastapi import Request

from gateway.agents.api_keys import ApiKey
from gateway.http.auth import bearer_token, services_of

__all__ = ["authorize_caller", "require_agent_key"]


async def authorize_caller(request: Request, agent_id: str) -> ApiKey:
    """The caller's key record if it may call ``agent_id`` now (one call of its per-minute limit)."""
    return await services_of(request).api_keys.authorize(bearer_token(request), agent_id)


async def require_agent_key(agent_id: str, request: Request) -> ApiKey:
    """FastAPI dependency: ``agent_id`` is the path parameter of the route that depends on it."""
    return await authorize_caller(request, agent_id)

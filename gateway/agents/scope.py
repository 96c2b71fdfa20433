"""What one API call may reach: its server-side session and the knowledge it may search.

A caller's session id (``X-Session-ID``, or ``user`` on ``/v1/chat/completions``) names a
conversation *within its API key*: the session the gateway keeps is derived from (agent, key,
the caller's id), so two keys of one agent that send the same id — two customers who both use
e-mail addresses as end-user ids — never share a conversation, and neither can read the other's.
Whoever holds the key controls its end-user ids; a new key (rotation) starts new sessions.

A per-call override can only narrow what the agent's version allows: a knowledge base outside the
agent's ``knowledgeBases`` (when it lists any) or a label outside its extra ``labels`` is refused
with 403 naming it, whatever the retrieval mode, before anything is searched.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from gateway.agents.definitions import AgentConfig
from gateway.core.errors import Forbidden
from rag_core.topic import RAG_CONTEXT_LABEL

__all__ = ["SESSIONS", "api_session", "narrowed"]

SESSIONS = uuid.UUID("5b1d6c1e-8a4f-4c0e-9d55-0a6f3c2b7e10")  # namespace of the derived session ids


def api_session(agent_id: str, key_id: str, caller_session: str | None, *, kind: str = "session") -> str | None:
    """The server-side session id for a caller's own id (None: no memory, a one-off conversation).

    ``kind`` keeps the two ways of naming a session apart (``session`` for ``X-Session-ID``,
    ``user`` for the OpenAI ``user`` field), so a ``user`` string never lands in a UUID's session."""
    if caller_session is None:
        return None
    return str(uuid.uuid5(SESSIONS, f"{agent_id}\n{key_id}\n{kind}\n{caller_session}"))


def _outside(requested: Sequence[str], allowed: Sequence[str]) -> list[str]:
    return [name for name in dict.fromkeys(requested) if name not in allowed]


def narrowed(agent: AgentConfig, overrides: dict) -> dict:
    """``overrides`` (snake_case AgentConfig fields) with the scoping ones checked against ``agent``.

    ``knowledgeBases``: a subset of the agent's list (any, when the agent lists none); an empty list
    means the agent's own. ``labels``: the pool stays the ``rag_context`` topics and the extra labels
    must be among the agent's extra labels (any, when it has none); an empty list means the agent's."""
    out = dict(overrides)
    if "knowledge_bases" in out:
        requested = out["knowledge_bases"] or agent.knowledge_bases
        if agent.knowledge_bases and (outside := _outside(requested, agent.knowledge_bases)):
            raise Forbidden(f"knowledgeBases: this agent may not search {', '.join(map(repr, outside))} "
                            f"(it may search {', '.join(map(repr, agent.knowledge_bases))})")
        out["knowledge_bases"] = list(dict.fromkeys(requested))
    if "labels" in out:
        extra = [label for label in agent.labels if label != RAG_CONTEXT_LABEL]
        requested = [label for label in out["labels"] if label != RAG_CONTEXT_LABEL] or extra
        if extra and (outside := _outside(requested, extra)):
            raise Forbidden(f"labels: this agent may not search topics labelled {', '.join(map(repr, outside))} "
                            f"(its labels are {', '.join(map(repr, extra))})")
        out["labels"] = [RAG_CONTEXT_LABEL, *dict.fromkeys(requested)]
    return out

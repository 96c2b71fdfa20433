"""The channels' own agent (id ``SWITCHBOARD_AGENT_ID``) as one of the agent API's agents: each turn
reads how to retrieve (inline or agentic, how many topics, which knowledge bases) and how to cite
from its latest version, so a ``PATCH /v1/agents/{id}`` changes the channels too. Read at most every
``ttl_s`` per process; while it cannot be read (no definition yet, Redis away) the settings decide."""

from __future__ import annotations

import logging
import time

from gateway.agents.definitions import AgentConfig
from gateway.agents.store import AgentStore
from gateway.core.errors import GatewayError
from gateway.knowledge.rag_preparation import RetrievalChoice
from gateway.turn.citations import CitationPolicy

log = logging.getLogger(__name__)


class ChannelAgent:
    def __init__(self, agents: AgentStore, agent_id: str, ttl_s: float = 5.0,
                 citations: CitationPolicy | None = None) -> None:
        self.agents = agents
        self.agent_id = agent_id
        self.ttl_s = ttl_s
        self.default_citations = citations or CitationPolicy()
        self._cached: tuple[float, AgentConfig | None] | None = None

    async def _config(self) -> AgentConfig | None:
        now = time.monotonic()
        if self._cached is not None and now - self._cached[0] < self.ttl_s:
            return self._cached[1]
        try:
            config: AgentConfig | None = (await self.agents.get(self.agent_id)).config
        except GatewayError:
            config = None  # no definition (yet): the settings decide
        except Exception as exc:  # Redis away: the settings decide until it is back
            log.warning("could not read the channels' agent definition: %s", exc)
            config = None
        self._cached = (now, config)
        return config

    async def choice(self) -> RetrievalChoice | None:
        config = await self._config()
        if config is None:
            return None
        return RetrievalChoice(mode=config.retrieval_mode, k=config.limit, kbs=tuple(config.knowledge_bases),
                               controls=config.retrieval_controls)

    async def citations(self) -> CitationPolicy | None:
        config = await self._config()
        if config is None or config.citations is None:
            return None
        return config.citations.over(self.default_citations)

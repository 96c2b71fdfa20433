"""The channels' own agent (id ``SWITCHBOARD_AGENT_ID``) as one of the agent API's agents: each turn
reads how to retrieve (inline or agentic, how many topics, which knowledge bases) and how to cite
from its latest version, so a ``PATCH /v1/agents/{id}`` changes the channels too. Read at most every
``ttl_s`` per process; while it cannot be read (no definition yet, Redis away) the settings decide.

A channel connection may answer as another agent (``agent`` on the inbound message: ``id`` or
``id@version``): its turns read that agent's definition the same way."""

from __future__ import annotations

import logging
import time

from gateway.agents.definitions import AgentConfig, ToolChoice
from gateway.agents.store import LATEST, AgentStore
from gateway.core.errors import GatewayError
from gateway.knowledge.rag_preparation import RetrievalChoice
from gateway.turn.citations import CitationPolicy
from gateway.turn.llm import CallOptions
from gateway.turn.pipeline import Turn

log = logging.getLogger(__name__)


class ChannelAgent:
    def __init__(self, agents: AgentStore, agent_id: str, ttl_s: float = 5.0,
                 citations: CitationPolicy | None = None) -> None:
        self.agents = agents
        self.agent_id = agent_id
        self.ttl_s = ttl_s
        self.default_citations = citations or CitationPolicy()
        self._cached: dict[str | None, tuple[float, AgentConfig | None]] = {}

    async def _config(self, agent: str | None = None) -> AgentConfig | None:
        now = time.monotonic()
        cached = self._cached.get(agent)
        if cached is not None and now - cached[0] < self.ttl_s:
            return cached[1]
        try:
            config: AgentConfig | None = await self._read(agent)
        except GatewayError:
            config = None  # no definition (yet): the settings decide
        except Exception as exc:  # Redis away: the settings decide until it is back
            log.warning("could not read the channels' agent definition: %s", exc)
            config = None
        if len(self._cached) > 1024:
            self._cached.clear()
        self._cached[agent] = (now, config)
        return config

    async def _read(self, agent: str | None) -> AgentConfig:
        if agent is None:
            return (await self.agents.get(self.agent_id)).config
        agent_id, _, version = agent.partition("@")
        return (await self.agents.resolve(agent_id, version or LATEST)).definition.config

    async def choice(self, agent: str | None = None) -> RetrievalChoice | None:
        config = await self._config(agent)
        if config is None:
            return None
        return RetrievalChoice(mode=config.retrieval_mode, k=config.limit, kbs=tuple(config.knowledge_bases),
                               controls=config.retrieval_controls)

    async def citations(self, agent: str | None = None) -> CitationPolicy | None:
        config = await self._config(agent)
        if config is None or config.citations is None:
            return None
        return config.citations.over(self.default_citations)

    async def vision(self, agent: str | None = None) -> bool:
        """Whether the agent's model sees images (``config.vision``, issue 44)."""
        config = await self._config(agent)
        return config is not None and config.vision

    async def model(self, agent: str | None = None) -> str | None:
        """The agent's own model (``config.llmModelId``); None: ``SWITCHBOARD_LLM_MODEL``."""
        config = await self._config(agent)
        return None if config is None else config.llm_model_id

    async def call_options(self, agent: str | None = None) -> CallOptions | None:
        """The agent's model and inference settings for its channel turns (``AgentConfig.channel_call_options``);
        None: the settings'."""
        config = await self._config(agent)
        return None if config is None else config.channel_call_options()

    async def tools(self, agent: str | None = None) -> list[ToolChoice]:
        config = await self._config(agent)
        return list(config.tools) if config is not None else []

    async def instructions(self, agent: str | None) -> str | None:
        """The agent's own system prompt as the prompt template's instructions (``AgentConfig.own_instructions``),
        the channels' agent's included: it answers the same on a channel as through the agent API."""
        config = await self._config(agent)
        return None if config is None else config.own_instructions()


class AgentInstructions:
    """A turn preparer: a turn follows its agent's own system prompt, when it has one, in place of the
    business instructions (the rest of the prompt — template, sections, live data, calendar — is every agent's)."""

    def __init__(self, agent: ChannelAgent) -> None:
        self.agent = agent

    async def prepare(self, turn: Turn) -> None:
        instructions = await self.agent.instructions(turn.inbound.agent)
        if instructions is not None:
            turn.prompt_variables["business_instructions"] = instructions


class AgentCallOptions:
    """A turn preparer: a turn's reply, its tool rounds and its knowledge searches go to its agent's own model
    with its inference settings (``config.llmModelId``, ``config.inferenceConfig``), as through the agent API."""

    def __init__(self, agent: ChannelAgent) -> None:
        self.agent = agent

    async def prepare(self, turn: Turn) -> None:
        turn.call_options = await self.agent.call_options(turn.inbound.agent)

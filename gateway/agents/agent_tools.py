"""A turn preparer: the tools the answering agent's ``config.tools`` names, for the tool loop; those
marked ``confirm: true`` are proposed to the customer and called on their yes (``gateway.turn.tool_confirm``)."""

from __future__ import annotations

from gateway.agents.channel_agent import ChannelAgent
from gateway.tools.service import ToolSources
from gateway.turn.pipeline import Turn

__all__ = ["AgentTools"]


class AgentTools:
    def __init__(self, agent: ChannelAgent, sources: ToolSources) -> None:
        self.agent = agent
        self.sources = sources

    async def prepare(self, turn: Turn) -> None:
        choices = await self.agent.tools(turn.inbound.agent)
        turn.tools = await self.sources.for_turn([c.name for c in choices],
                                                 confirm=frozenset(c.name for c in choices if c.confirm))

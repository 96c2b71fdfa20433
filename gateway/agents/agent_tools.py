"""A turn preparer: the tools the answering agent's ``config.tools`` names, for the tool loop; those
marked ``confirm: true`` are proposed to the customer and called on their yes (``gateway.turn.tool_confirm``)."""

from __future__ import annotations

from gateway.agents.channel_agent import ChannelAgent
from gateway.tools.service import ToolSources
from gateway.turn.pipeline import Turn
from gateway.turn.tools import BUILTIN_TOOLS, with_builtins

__all__ = ["AgentTools"]


class AgentTools:
    def __init__(self, agent: ChannelAgent, sources: ToolSources) -> None:
        self.agent = agent
        self.sources = sources

    async def prepare(self, turn: Turn) -> None:
        choices = await self.agent.tools(turn.inbound.agent)
        names = [c.name for c in choices]
        turn.tools = with_builtins(await self.sources.for_turn([n for n in names if n not in BUILTIN_TOOLS],
                                                               confirm=frozenset(c.name for c in choices if c.confirm)),
                                   names)

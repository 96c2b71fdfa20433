"""Which agents the business's prompt and live data reach: every agent, on every entry (channels, web chat,
the agent API, ``/v1/chat/completions``); an agent with a ``systemPrompt`` of its own has it in place of the
instructions. The Prompt and Live data screens say so by name."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.services import Services


@dataclass(frozen=True)
class AgentUse:
    label: str
    own_instructions: bool  # its own system prompt takes the place of the console's instructions


async def agents_using(services: Services) -> list[AgentUse]:
    if services.agents is None:
        return []
    try:
        agents = await services.agents.list()
    except Exception:  # Redis away: the page says nothing about agents rather than failing
        return []
    return [AgentUse(f"{a.display_name or a.name} ({a.name})", a.config.own_instructions() is not None)
            for a in agents]

"""The channels' agent (id ``SWITCHBOARD_AGENT_ID``): one of the agent API's agents, made from the settings.

It follows the settings it was made from (the model, retrieval mode, knowledge bases, retrieval limit) from
one start to the next until an operator edits one of those fields through the API or the console; from
then on the operator's version stands and a start only logs the difference. What the settings last made
is kept beside the agent, so an edit is told apart from an old setting.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from gateway.agents.store import AgentStore
from gateway.core.errors import GatewayError, NotFound
from gateway.core.settings import Settings

log = logging.getLogger(__name__)


def derived_config(settings: Settings) -> dict[str, Any]:
    kbs = [name.strip() for name in settings.retrieval_kbs.split(",") if name.strip()]
    return {"knowledgeBases": kbs, "limit": settings.rag_top_k, "retrievalMode": settings.retrieval_mode,
            "llmModelId": settings.llm_model}


async def sync_channel_agent(agents: AgentStore, settings: Settings) -> None:
    derived = derived_config(settings)
    made_key = agents.store.key("agent", settings.agent_id, "from-settings")
    try:
        current = await agents.get(settings.agent_id)
    except NotFound:
        try:
            await agents.create({
                "name": settings.agent_id.lower(), "displayName": "The channels' agent",
                "description": "answers on every configured channel", "config": derived,
            }, agent_id=settings.agent_id)
        except GatewayError as exc:  # e.g. a name taken by an agent made through the API
            log.warning("could not register the channels' agent %r: %s", settings.agent_id, exc)
            return
        await agents.redis.set(made_key, json.dumps(derived))
        return
    config = current.config.model_dump(by_alias=True, mode="json")
    now = {name: config[name] for name in derived}
    raw = await agents.redis.get(made_key)
    if raw is not None:
        made = json.loads(raw)
    elif len(await agents.versions(settings.agent_id)) == 1:  # made before this was kept, never edited
        made = now
    else:
        made = None
    if now == derived:
        if made != derived:
            await agents.redis.set(made_key, json.dumps(derived))
        return
    if made != now:
        log.info("the channels' agent %r was edited by an operator; the settings' %s are not applied to it",
                 settings.agent_id, ", ".join(f"{name}={value!r}" for name, value in derived.items()
                                              if now.get(name) != value))
        return
    await agents.patch(settings.agent_id, {"config": derived})
    await agents.redis.set(made_key, json.dumps(derived))
    log.info("the channels' agent %r follows the settings: %s", settings.agent_id,
             ", ".join(f"{name}={value!r}" for name, value in derived.items() if now.get(name) != value))

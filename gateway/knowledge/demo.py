"""The demo knowledge base of ``switchboard serve --demo`` (a bike shop), loaded through the normal import
path, and its removal (``switchboard demo remove``, ``DELETE /api/kb/demo``, the console's "Remove the demo")
once a business's own content is in.

The demo also fills in the business's name and opening hours where the operator has set none. What it
wrote is recorded beside the attributes, so its removal resets exactly those values and only while they are
still the demo's: a value the operator changed since stays. A removed demo is not loaded again by a later
``--demo`` start into the (then perhaps empty) knowledge base."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from gateway.conversation.attributes import CustomerAttributes
from rag_core.ingestion import import_topics, parse_markdown

log = logging.getLogger(__name__)
DEMO_FILE = "harbor_bikes.md"


def _demo_text() -> str:
    return resources.files("gateway.demo").joinpath(DEMO_FILE).read_text(encoding="utf-8")


def demo_sources() -> list[str]:
    """The sources of the demo's topics, as the import names them."""
    return [topic.source for topic in parse_markdown(_demo_text()).topics]


# What the demo's topics say, where the prompt's calendar and first line read it (unless already set).
DEMO_ATTRIBUTES = {
    "project_attributes_setting_business_name": "Harbor Bikes",
    "project_attributes_setting_business_hours": {
        "mon": "09:00-18:00", "tue": "09:00-18:00", "wed": "09:00-18:00", "thu": "09:00-18:00",
        "fri": "09:00-18:00", "sat": "10:00-16:00", "sun": "closed",
    },
}


@dataclass(frozen=True)
class DemoRemoval:
    topics: int  # demo topics deleted
    attributes: list[str] = field(default_factory=list)  # the demo's values reset to their defaults
    kept: list[str] = field(default_factory=list)  # values the demo wrote that the operator has changed since

    def summary(self) -> str:
        parts = [f"{self.topics} demo topic(s)"] if self.topics else []
        if self.attributes:
            parts.append("the demo's " + _listed(self.attributes))
        said = "removed " + " and ".join(parts) if parts else "nothing of the demo left to remove"
        if self.kept:
            said += "; kept your own " + _listed(self.kept)
        return said


def _listed(names: list[str]) -> str:
    labels = [_LABELS.get(n, n) for n in names]
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


_LABELS = {"project_attributes_setting_business_name": "business name",
           "project_attributes_setting_business_hours": "business hours"}


class DemoRecord:
    """What the demo wrote into the customer attributes, and whether it was removed (one Redis hash)."""

    REMOVED = "__removed__"

    def __init__(self, attributes: CustomerAttributes) -> None:
        self.attributes = attributes
        self.redis = attributes.store.redis
        self.key = attributes.store.key("demo", "wrote")

    async def wrote(self, name: str, value: Any) -> None:
        await self.redis.hset(self.key, name, json.dumps(value, sort_keys=True))

    async def written(self) -> dict[str, Any] | None:
        """The values the demo wrote, by attribute; None when nothing was recorded (a demo loaded before the
        record existed: its values are then the ones it always writes)."""
        raw = await self.redis.hgetall(self.key)
        if not raw:
            return None
        written = {k.decode(): json.loads(v) for k, v in raw.items() if k.decode() != self.REMOVED}
        order = [*DEMO_ATTRIBUTES, *sorted(written)]  # a hash has no order; what is said about them has one
        return {name: written[name] for name in dict.fromkeys(order) if name in written}

    async def removed(self) -> bool:
        return bool(await self.redis.hexists(self.key, self.REMOVED))

    async def mark_removed(self) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(self.key)
        pipe.hset(self.key, self.REMOVED, "true")
        await pipe.execute()


async def load_demo_knowledge(knowledge, attributes: CustomerAttributes | None = None) -> None:
    """Import the demo topics unless the knowledge base already has topics (an operator's own) or the demo
    was removed, and fill in the demo business's name and opening hours where the operator has set none."""
    if await knowledge.kb.count() > 0:
        return
    if attributes is not None:
        record = DemoRecord(attributes)
        if await record.removed():
            log.info("the demo was removed (switchboard demo remove); not loading it again")
            return
        for name, value in DEMO_ATTRIBUTES.items():
            if not await attributes.get(name):
                await record.wrote(name, value)  # recorded first: a removal after a crash still finds it
                await attributes.set(name, value)
    report = await import_topics(knowledge.kb, _demo_text(), "markdown")
    log.info("demo knowledge base loaded: %d topics (Harbor Bikes); `switchboard demo remove` takes them out",
             len(report.created))


async def demo_topics_present(knowledge) -> int:
    return sum([await knowledge.kb.get(source) is not None for source in demo_sources()])


async def demo_attributes_present(attributes: CustomerAttributes) -> list[str]:
    """The attributes that still hold what the demo wrote."""
    record = DemoRecord(attributes)
    if await record.removed():
        return []
    written = await record.written()
    written = DEMO_ATTRIBUTES if written is None else written
    return [name for name, value in written.items() if _same(await attributes.get(name), value)]


def _same(current: Any, written: Any) -> bool:
    return json.dumps(current, sort_keys=True, default=str) == json.dumps(written, sort_keys=True, default=str)


async def remove_demo_knowledge(knowledge) -> int:
    """Delete the demo's topics from the main knowledge base; the number deleted."""
    removed = await knowledge.kb.delete_many(demo_sources())
    if knowledge.cache is not None:  # cached searches may still name the demo's topics
        await knowledge.cache.clear()
    log.info("demo knowledge base removed: %d topics", removed)
    return removed


async def remove_demo(knowledge, attributes: CustomerAttributes) -> DemoRemoval:
    """Everything the demo put in: its topics, and the attribute values it wrote that are still its own
    (reset to their defaults, so the prompt says "an AI assistant" and the calendar shows no hours). The
    calendar follows the attributes through ``AttributeChanged``; a caller without the event bus rebuilds it."""
    topics = await remove_demo_knowledge(knowledge)
    record = DemoRecord(attributes)
    recorded = await record.written()
    written = recorded if recorded is not None else {} if await record.removed() else DEMO_ATTRIBUTES
    reset, kept = [], []
    for name, value in written.items():
        if _same(await attributes.get(name), value):
            await attributes.set(name, attributes.spec(name).default)
            reset.append(name)
        elif recorded is not None:  # the demo wrote it and the operator has changed it since
            kept.append(name)
    await record.mark_removed()
    removal = DemoRemoval(topics=topics, attributes=reset, kept=kept)
    log.info("demo: %s", removal.summary())
    return removal

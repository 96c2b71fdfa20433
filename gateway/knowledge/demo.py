"""The demo knowledge base of ``switchboard serve --demo`` (a bike shop), loaded through the normal import
path, and its removal (``switchboard demo remove``, the console's "Remove the demo") once a business's own
content is in."""

from __future__ import annotations

import logging
from importlib import resources

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


async def load_demo_knowledge(knowledge, attributes=None) -> None:
    """Import the demo topics unless the knowledge base already has topics (an operator's own), and fill
    in the demo business's name and opening hours where the operator has set none."""
    if await knowledge.kb.count() > 0:
        return
    if attributes is not None:
        for name, value in DEMO_ATTRIBUTES.items():
            if not await attributes.get(name):
                await attributes.set(name, value)
    report = await import_topics(knowledge.kb, _demo_text(), "markdown")
    log.info("demo knowledge base loaded: %d topics (Harbor Bikes); `switchboard demo remove` takes them out",
             len(report.created))


async def demo_topics_present(knowledge) -> int:
    return sum([await knowledge.kb.get(source) is not None for source in demo_sources()])


async def remove_demo_knowledge(knowledge) -> int:
    """Delete the demo's topics from the main knowledge base; the number deleted."""
    removed = await knowledge.kb.delete_many(demo_sources())
    if knowledge.cache is not None:  # cached searches may still name the demo's topics
        await knowledge.cache.clear()
    log.info("demo knowledge base removed: %d topics", removed)
    return removed

"""The demo knowledge base of ``switchboard serve --demo`` (a bike shop), loaded through the normal import path."""

from __future__ import annotations

import logging
from importlib import resources

from rag_core.ingestion import import_topics

log = logging.getLogger(__name__)
DEMO_FILE = "harbor_bikes.md"


async def load_demo_knowledge(knowledge) -> None:
    """Import the demo topics unless the knowledge base already has topics (an operator's own)."""
    if await knowledge.kb.count() > 0:
        return
    text = resources.files("gateway.demo").joinpath(DEMO_FILE).read_text(encoding="utf-8")
    report = await import_topics(knowledge.kb, text, "markdown")
    log.info("demo knowledge base loaded: %d topics (Harbor Bikes)", len(report.created))

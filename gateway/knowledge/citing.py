"""CiteSources: after retrieval, number the turn's hits as the sources its reply may cite.

Runs after ``PrepareRagContext``: the turn's hits become ``SourceRef`` s (with the page or document
URL when the topic is a chunk of a crawled page), and with ``inline`` / ``footnote`` citations the
RAG text is numbered (``[1] Title``). The policy is the channels' agent's ``citations`` when its
definition has one, otherwise ``SWITCHBOARD_CITATIONS_FORMAT`` / ``SWITCHBOARD_CITATIONS_VERIFY``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from gateway.core.models import SourceRef
from gateway.core.settings import Settings
from gateway.turn.citations import CitationPolicy
from gateway.turn.pipeline import Turn
from gateway.turn.responders import KnowledgeHit
from rag_core.document import DocumentStore
from rag_core.rag_context import format_rag

__all__ = ["CiteSources", "PolicySource", "document_urls", "policy_of", "source_refs"]

log = logging.getLogger(__name__)

PolicySource = Callable[[str | None], Awaitable[CitationPolicy | None]]  # the agent (None: the channels')
UrlOf = Callable[[str], Awaitable[str | None]]


def policy_of(settings: Settings) -> CitationPolicy:
    return CitationPolicy(format=settings.citations_format, verify=settings.citations_verify)


def document_urls(documents: Callable[[], DocumentStore]) -> UrlOf:
    """A chunk's (``doc:<id>#<n>``) page URL, from its document record; other topics have none.
    ``documents`` is called when a URL is wanted (the knowledge base opens lazily)."""

    async def url_of(source: str) -> str | None:
        if not source.startswith("doc:"):
            return None
        record = await documents().get(source[4:].split("#", 1)[0])
        return record.url if record is not None else None

    return url_of


async def source_refs(hits: Sequence[KnowledgeHit], url_of: UrlOf | None = None) -> list[SourceRef]:
    refs = []
    for n, hit in enumerate(hits, 1):
        url = None
        if url_of is not None:
            try:
                url = await url_of(hit.source)
            except Exception as exc:  # a link is a nicety: the source is cited without it
                log.warning("no URL for source %s: %s", hit.source, exc)
        refs.append(SourceRef(n=n, source=hit.source, title=hit.title, score=round(hit.score, 4), url=url))
    return refs


class CiteSources:
    def __init__(self, settings: Settings, policy: PolicySource | None = None, url_of: UrlOf | None = None) -> None:
        self.settings = settings
        self.policy = policy
        self.url_of = url_of

    async def prepare(self, turn: Turn) -> None:
        chosen = await self.policy(turn.inbound.agent) if self.policy is not None else None  # conn (issue 28)
        policy = chosen or policy_of(self.settings)
        turn.citations = policy
        if policy.format == "none" or turn.agentic or not turn.hits:
            turn.sources = []
            return
        turn.sources = await source_refs(turn.hits, self.url_of)
        if policy.numbered:
            turn.rag = format_rag(turn.hits, numbered=True)

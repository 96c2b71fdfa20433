"""Adjacent chunks (``adjacentChunkRange`` / ``adjacentChunkMerge``): a retrieved document chunk
brings up to N chunks before and after it, following the chunks' ``prev_source`` / ``next_source``
links. Merged, their text joins the retrieved chunk's in document order; not merged, they are
separate hits just after it (scored a little below it). Topics that are not document chunks have
no neighbours."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from rag_core.retrieval import Hit
from rag_core.topic import Topic

Fetch = Callable[[Sequence[str]], Awaitable[list[Topic]]]


async def widen(hits: list[Hit], span: int, merge: bool, fetch: Fetch) -> list[Hit]:
    if span <= 0 or not hits:
        return hits
    before: dict[str, list[Topic]] = {h.topic.source: [] for h in hits}
    after: dict[str, list[Topic]] = {h.topic.source: [] for h in hits}
    edges = {h.topic.source: (h.topic, h.topic) for h in hits}  # the outermost chunk reached on each side
    for _ in range(span):
        wanted = {s: (first.prev_source, last.next_source) for s, (first, last) in edges.items()}
        names = [n for pair in wanted.values() for n in pair if n]
        found = {t.source: t for t in await fetch(names)} if names else {}
        for source, (prev_name, next_name) in wanted.items():
            first, last = edges[source]
            if prev_name in found:
                first = found[prev_name]
                before[source].insert(0, first)
            if next_name in found:
                last = found[next_name]
                after[source].append(last)
            edges[source] = (first, last)
    seen = {h.topic.source for h in hits}
    out: list[Hit] = []
    for hit in hits:
        neighbours = [*before[hit.topic.source], *after[hit.topic.source]]
        if merge:
            parts = [t.summary for t in before[hit.topic.source]] + [hit.topic.summary] + [
                t.summary for t in after[hit.topic.source]]
            out.append(hit.model_copy(update={
                "topic": hit.topic.model_copy(update={"summary": "\n\n".join(p for p in parts if p)})}))
            continue
        out.append(hit)
        for topic in neighbours:
            if topic.source not in seen:
                seen.add(topic.source)
                out.append(Hit(topic=topic, score=round(hit.score * 0.9, 6)))
    return out

"""Unanswered questions grouped by what they mean, not how they are worded.

A turn files an unanswered question under its content words (``outcomes.gap_group``: cheap, in the turn's
closing round trip). When the gaps are read, the groups are merged by meaning: each group's first example
is embedded once with the knowledge base's own model (its vector kept beside the group, for as long as the
group's counts), and groups whose vectors are similar enough are one gap. "Where
can I park?", "is there parking nearby" and "can I leave my car at the studio" become one gap.
Without an embedding model the word groups are the gaps.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["SIMILAR", "Embed", "GapGroup", "merge_similar", "unit"]

log = logging.getLogger(__name__)

# Cosine similarity from which two questions ask the same thing. all-MiniLM-L6-v2 on a small business's
# questions: paraphrases of one question mostly 0.5-0.9, questions on different subjects up to ~0.4.
SIMILAR = 0.45

Embed = Callable[[Sequence[str]], Awaitable[list[list[float]]]]


@dataclass
class GapGroup:
    id: str
    count: int
    examples: list[str]
    offered_topics: set[str] = field(default_factory=set)
    members: list[str] = field(default_factory=list)  # the word groups merged into this one (its own first)

    def answer(self) -> dict:
        return {"id": self.id, "count": self.count, "examples": self.examples,
                "offered_topics": sorted(self.offered_topics), "groups": self.members}


def unit(vector: Sequence[float] | np.ndarray) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array


def merge_similar(groups: list[GapGroup], vectors: dict[str, np.ndarray], *, similar: float = SIMILAR,
                  examples: int = 5) -> list[GapGroup]:
    """``groups`` merged where they ask the same thing: two groups whose vectors are within ``similar`` are
    one gap, and so, through them, are their other neighbours (single linkage: "parking options?" and
    "where should I put my car" meet through "where can I park?"). A group without a vector stays on its
    own. Each gap is named by its most asked group; counts add up, examples and offered topics are pooled
    (the first ``examples`` distinct examples, most asked group first)."""
    ordered = sorted(groups, key=lambda g: -g.count)
    parent = list(range(len(ordered)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    with_vector = [i for i, g in enumerate(ordered) if g.id in vectors]
    if len(with_vector) > 1:
        matrix = np.stack([vectors[ordered[i].id] for i in with_vector])
        scores = matrix @ matrix.T
        for a, b in zip(*np.nonzero(np.triu(scores >= similar, k=1)), strict=True):
            first, second = root(with_vector[int(a)]), root(with_vector[int(b)])
            if first != second:  # the more asked group names the gap
                parent[max(first, second)] = min(first, second)
    merged: dict[int, GapGroup] = {}
    for i, group in enumerate(ordered):
        top = root(i)
        into = merged.get(top)
        if into is None:
            merged[top] = GapGroup(group.id, group.count, list(dict.fromkeys(group.examples))[:examples],
                                   set(group.offered_topics), [group.id])
            continue
        into.count += group.count
        into.examples = list(dict.fromkeys([*into.examples, *group.examples]))[:examples]
        into.offered_topics |= group.offered_topics
        into.members.append(group.id)
    return sorted(merged.values(), key=lambda g: -g.count)

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
    """``groups`` merged where they ask the same thing. Most asked first, each group joins the gap whose
    centre (the mean of its groups' vectors) is most similar to it, when that is at least ``similar``, and
    otherwise starts a gap of its own; then gaps whose centres are that similar are joined (a gap's early
    groups may have missed a centre that its later ones filled in). Comparing with a gap's centre, not
    with any one member, keeps subjects apart that a chain of near neighbours would join (single linkage:
    A like B, B like C, so A with C). A group without a vector stays on its own. Each gap
    is named by its most asked group; counts add up, examples and offered topics are pooled (the first
    ``examples`` distinct examples, most asked group first)."""
    ordered = sorted(groups, key=lambda g: -g.count)
    parent = list(range(len(ordered)))
    sums: list[np.ndarray] = []  # per gap with a vector: the sum of its groups' unit vectors
    leaders: list[int] = []  # per gap: the index of the group that names it
    for i, group in enumerate(ordered):
        vector = vectors.get(group.id)
        if vector is None:
            continue
        if sums:
            centres = np.stack(sums)
            centres /= np.maximum(np.linalg.norm(centres, axis=1, keepdims=True), 1e-12)
            scores = centres @ vector
            best = int(np.argmax(scores))
            if scores[best] >= similar:
                parent[i] = leaders[best]
                sums[best] = sums[best] + vector
                continue
        sums.append(np.asarray(vector, dtype=np.float32).copy())
        leaders.append(i)
    for absorbed, into in _join_close_centres(sums, similar):  # what the greedy pass split by arriving early
        for j, top in enumerate(parent):
            if top == leaders[absorbed]:
                parent[j] = leaders[into]

    def root(i: int) -> int:
        return parent[i]

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


def _join_close_centres(sums: list[np.ndarray], similar: float) -> list[tuple[int, int]]:
    """Gaps whose centres are at least ``similar`` alike, joined closest pair first (centroid linkage; a
    joined gap's centre is its groups' mean), as ``(absorbed, into)`` pairs of indexes into ``sums``, the
    earlier (more asked) gap absorbing the later. Only the joined gap's row is computed again."""
    if len(sums) < 2:
        return []
    total = np.stack(sums).astype(np.float32)
    alive = np.ones(len(sums), dtype=bool)

    def centres(rows: np.ndarray) -> np.ndarray:
        return rows / np.maximum(np.linalg.norm(rows, axis=-1, keepdims=True), 1e-12)

    unit_centres = centres(total)
    scores = unit_centres @ unit_centres.T
    np.fill_diagonal(scores, -np.inf)
    joins: list[tuple[int, int]] = []
    while True:
        best = int(np.argmax(scores))
        a, b = divmod(best, len(sums))
        if scores[a, b] < similar:
            return joins
        into, absorbed = min(a, b), max(a, b)
        total[into] += total[absorbed]
        alive[absorbed] = False
        scores[absorbed, :] = -np.inf
        scores[:, absorbed] = -np.inf
        row = centres(total) @ centres(total[into])
        row[~alive] = -np.inf
        row[into] = -np.inf
        scores[into, :] = row
        scores[:, into] = row
        joins.append((absorbed, into))

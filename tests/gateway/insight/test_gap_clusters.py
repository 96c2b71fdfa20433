"""Unanswered questions grouped by meaning with the knowledge base's embedding model (all-MiniLM-L6-v2):
ten differently worded questions about parking are one gap, five questions on other subjects stay apart."""

from __future__ import annotations

import math

from gateway.insight.gap_clusters import GapGroup, merge_similar, unit
from gateway.insight.outcomes import gap_group
from rag_core import FastEmbedEncoder
from tests.conftest import MODEL_PATH

PARKING = ["Where can I park?", "is there parking near the studio", "can I leave my car somewhere close by",
           "Do you have a car park?", "where do visitors park their cars", "any parking spaces for customers?",
           "Is street parking allowed outside?", "where should I put my car when I come to class",
           "parking options?", "Do you offer free parking for students"]
OTHERS = ["Do you sell gift vouchers?", "what time do you open on sunday", "how much is a pottery course",
          "can I bring my dog", "Do you ship glazes abroad?"]


async def test_ten_wordings_of_one_question_are_one_gap_and_other_subjects_stay_apart():
    questions = PARKING + OTHERS
    groups = [GapGroup(gap_group(q)[1], count=1 + i % 3, examples=[q]) for i, q in enumerate(questions)]
    assert len({g.id for g in groups}) == 15  # by their words, fifteen groups
    vectors = await FastEmbedEncoder(model_path=MODEL_PATH).embed_queries(questions)
    merged = merge_similar(groups, {g.id: unit(v) for g, v in zip(groups, vectors, strict=True)})

    parking = next(g for g in merged if "Where can I park?" in g.examples or set(g.members) & {
        x.id for x in groups[:10]})
    assert sorted(parking.members) == sorted(g.id for g in groups[:10])
    assert parking.count == sum(g.count for g in groups[:10])
    assert parking.id == max(groups[:10], key=lambda g: g.count).id  # named by its most asked wording
    assert len(parking.examples) == 5
    assert sorted(len(g.members) for g in merged) == [1, 1, 1, 1, 1, 10]


def test_groups_without_a_vector_stay_as_they_are():
    groups = [GapGroup("a", 3, ["parking?"]), GapGroup("b", 2, ["where to park"])]
    assert [g.members for g in merge_similar(groups, {})] == [["a"], ["b"]]


def test_a_chain_of_near_neighbours_does_not_join_its_far_ends():
    """Four questions 60 degrees apart in turn: each is like the next (cosine 0.5), the ends are opposite.
    Single linkage made them one gap; by their gaps' centres they are two."""
    angles = [0, 60, 120, 180]
    vectors = {f"q{a}": unit([math.cos(math.radians(a)), math.sin(math.radians(a)), 0.0]) for a in angles}
    groups = [GapGroup(f"q{a}", count=10 - i, examples=[f"question {a}"]) for i, a in enumerate(angles)]
    merged = merge_similar(groups, vectors, similar=0.45)
    assert sorted(sorted(g.members) for g in merged) == [["q0", "q60"], ["q120", "q180"]]

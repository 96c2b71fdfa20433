"""How a conversation becomes a retrieval query: the last user message counts most, earlier
user turns add context at lower weight (tuned on the OR-ShARC and StackFAQ dev splits).

Agent turns are left out by default: a reply usually quotes the topic it answered from, so
weighting it pins retrieval to the previous topic when the user moves on to a new question.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rag_core.retrieval import SearchRequest


@dataclass(frozen=True)
class QueryShape:
    history_weight: float = 0.5
    agent_weight: float = 0.0
    dense_history_weight: float = 0.5
    max_history_turns: int = 6

    def _recent(self, request: SearchRequest) -> list[tuple[str, str]]:
        turns = request.history[-self.max_history_turns :] if self.max_history_turns else []
        return [
            (turn.role, turn.text)
            for turn in turns
            if turn.text.strip() and (turn.role == "user" or self.agent_weight > 0)
        ]

    def sparse_query(self, request: SearchRequest) -> list[tuple[str, float]]:
        weighted = [(request.query, 1.0)]
        for role, text in self._recent(request):
            weight = self.history_weight if role == "user" else self.agent_weight
            weighted.append((text, weight))
        return weighted

    def dense_texts(self, request: SearchRequest) -> list[str]:
        """The last message, then (when weighted) each recent history message on its own: a history
        message was the last message of an earlier turn, so a query vector cache already holds it and
        a turn embeds only its new message."""
        if not self.dense_history_weight:
            return [request.query]
        return [request.query, *(text for _, text in self._recent(request))]

    def dense_vector(self, vectors: Sequence[Sequence[float]]) -> list[float]:
        """Combine the vectors of ``dense_texts`` into one unit-length query vector: the last message's,
        plus ``dense_history_weight`` times the history's direction (its messages' vectors summed and
        normalised; with one history message, exactly that message's vector)."""
        query = list(vectors[0])
        if len(vectors) > 1:
            history = [sum(column) for column in zip(*vectors[1:], strict=True)]
            scale = self.dense_history_weight / (math.sqrt(sum(x * x for x in history)) or 1.0)
            query = [q + scale * h for q, h in zip(query, history, strict=True)]
        norm = math.sqrt(sum(x * x for x in query)) or 1.0
        return [x / norm for x in query]

"""The conversations of each outcome (resolved, handed off, unanswered, abandoned), newest activity first:
one sorted set per outcome, scored by the conversation's last activity.

The insight layer decides an outcome and writes it here (in the same round trip that counts it, and again
on each later turn, so the score follows the conversation's activity); the conversation list reads it to
filter by outcome without looking at every conversation."""

from __future__ import annotations

from gateway.conversation.store import RedisStore

__all__ = ["OUTCOMES", "OutcomeIndex"]

OUTCOMES: dict[str, str] = {  # as the conversation's insight flags name them, in the order they are shown
    "resolved": "Resolved", "handed_off": "Handed off", "unanswered": "Unanswered", "abandoned": "Abandoned",
}


class OutcomeIndex:
    def __init__(self, store: RedisStore) -> None:
        self.store = store

    def key(self, outcome: str) -> str:
        """The sorted set of ``outcome``'s conversations (id -> last activity, epoch seconds)."""
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r}")
        return self.store.key("convs", "outcome", outcome)

    @property
    def keys(self) -> list[str]:
        """Every outcome's key, in ``OUTCOMES`` order (what a Lua script is given)."""
        return [self.key(outcome) for outcome in OUTCOMES]

    def add_into(self, pipe, outcome: str, conversation_id: str, at: float, keep_s: int) -> None:
        """File the conversation under ``outcome`` (at its activity ``at``); entries idle past ``keep_s`` go."""
        key = self.key(outcome)
        pipe.zadd(key, {conversation_id: at})
        pipe.zremrangebyscore(key, "-inf", at - keep_s)

    async def ids(self, outcome: str, start: int, count: int) -> list[str]:
        """One page of ``outcome``'s conversations, newest activity first."""
        found = await self.store.redis.zrevrange(self.key(outcome), start, start + count - 1)
        return [raw.decode() for raw in found]

    async def having(self, outcome: str, ids: list[str]) -> list[str]:
        """Those of ``ids`` filed under ``outcome``, in ``ids``' order."""
        if not ids:
            return []
        scores = await self.store.redis.zmscore(self.key(outcome), ids)
        return [i for i, score in zip(ids, scores, strict=True) if score is not None]

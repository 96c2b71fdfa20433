"""Customers' ratings of bot replies: 👍 / 👎 with an optional comment, one vote per reply and voter
(changeable), stored with the conversation and counted in the daily counters as it is cast."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel

from gateway.conversation.store import RedisStore
from gateway.core.errors import InvalidInput, NotFound
from gateway.core.metrics import Metrics
from gateway.core.models import Role, utcnow
from gateway.insight.counters import DailyCounters, Dims
from gateway.insight.outcomes import CONVERSATION_TTL_S
from gateway.insight.webhooks import Webhooks

__all__ = ["COMMENTS_LISTED", "RECENT_COMMENTS", "Feedback", "Rating", "Vote", "Voter"]

Rating = Literal["up", "down"]
RECENT_COMMENTS = 500  # the comments kept for the Insights screen (newest first)
COMMENTS_LISTED = 50  # how many of them one report lists: the newest in its range and filters

# KEYS: the conversation's votes, its outcome flags. ARGV: field, the vote (JSON), its rating, TTL, flags TTL.
# Swaps the voter's vote in and keeps the conversation's count of standing 👎 (a 👎 changed to 👍 no longer
# stops it counting as resolved); returns the vote it replaced, if any.
_SWAP = """
local old = redis.call('HGET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[4]))
local delta = 0
if old and cjson.decode(old)['rating'] == 'down' then delta = delta - 1 end
if ARGV[3] == 'down' then delta = delta + 1 end
if delta ~= 0 then
  redis.call('HINCRBY', KEYS[2], 'down', delta)
  redis.call('EXPIRE', KEYS[2], tonumber(ARGV[5]))
end
return old
"""


@dataclass(frozen=True)
class Voter:
    """Who rates: ``id`` names them for one-vote-per-reply; ``persona_id`` set: they may rate only the
    replies of their own conversations (a web-chat visitor); ``thread`` set: only the replies of
    conversations in that chat (a Telegram chat, a Slack channel: anyone in it may press the buttons);
    neither: any (the admin token)."""

    id: str
    persona_id: str | None = None
    thread: str | None = None
    channel: str | None = None  # with ``thread``: the chat's channel


class Vote(BaseModel):
    conversation_id: str
    message_id: str
    voter: str
    rating: Rating
    comment: str | None = None
    at: datetime
    dims: str = ""  # the counters' agent|channel|connection it was counted under

    def counts(self, sign: int) -> dict[str, int]:
        return {self.rating: sign, "comments": sign if self.comment else 0}


class Feedback:
    def __init__(self, store: RedisStore, counters: DailyCounters, metrics: Metrics, comment_max_chars: int,
                 webhooks: Webhooks | None = None) -> None:
        self.store = store
        self.webhooks = webhooks
        self.counters = counters
        self.metrics = metrics
        self.comment_max_chars = comment_max_chars
        self._swap = store.redis.register_script(_SWAP)

    def key(self, conversation_id: str) -> str:
        return self.store.key("insight", "feedback", conversation_id)

    @property
    def comments_key(self) -> str:
        return self.store.key("insight", "comments")

    async def rate(self, conversation_id: str | None, message_id: str, voter: Voter, rating: Rating,
                   comment: str | None = None) -> Vote:
        """Cast or change ``voter``'s vote on a bot reply (``conversation_id`` None: in whichever conversation
        it is); ``NotFound`` when the conversation has no such reply (or it is not the voter's to rate: told
        apart from nothing, it would confirm ids)."""
        comment = (comment or "").strip() or None
        if comment is not None and len(comment) > self.comment_max_chars:
            raise InvalidInput(f"comment: {len(comment)} characters; the limit is {self.comment_max_chars}")
        message = await self.store.get_message(message_id)
        conversation_id = conversation_id or (message.conversation_id if message else "")
        if (message is None or message.conversation_id != conversation_id or message.role is not Role.AGENT
                or (voter.persona_id is not None and message.persona_id != voter.persona_id)
                or not await self._in_thread(message.conversation_id, voter)):
            raise NotFound(f"conversation {conversation_id} has no bot reply {message_id}")
        flags = self.store.key("insight", "conv", conversation_id)
        raw_dims = await self.store.redis.hget(flags, "dims")
        dims = Dims.parse(raw_dims.decode()) if raw_dims else Dims.of(None, message.channel, None)
        vote = Vote(conversation_id=conversation_id, message_id=message_id, voter=voter.id, rating=rating,
                    comment=comment, at=utcnow(), dims=dims.suffix)
        old_raw = await self._swap(keys=[self.key(conversation_id), flags],
                                   args=[f"{message_id}|{voter.id}", vote.model_dump_json(), rating,
                                         self.counters.ttl_s, CONVERSATION_TTL_S])
        pipe = self.store.redis.pipeline(transaction=False)
        if old_raw is not None:  # a changed vote: its earlier count goes, from the hour it was cast in
            old = Vote.model_validate_json(old_raw)
            self.counters.add_into(pipe, old.at, Dims.parse(old.dims), old.counts(-1))
        self.counters.add_into(pipe, vote.at, dims, vote.counts(1))
        if comment is not None:
            pipe.lpush(self.comments_key, vote.model_dump_json())
            pipe.ltrim(self.comments_key, 0, RECENT_COMMENTS - 1)
        if self.webhooks is not None:
            self.webhooks.emit_into(pipe, "message.feedback", conversation_id,
                                    {"message_id": message_id, "rating": rating, "comment": comment,
                                     "changed": old_raw is not None}, agent=dims.agent)
        await pipe.execute()
        self.metrics.insight_feedback.labels(dims.agent, dims.channel, rating).inc()
        return vote

    async def _in_thread(self, conversation_id: str, voter: Voter) -> bool:
        if voter.thread is None:
            return True
        conversation = await self.store.get_conversation(conversation_id)
        return (conversation is not None and conversation.thread == voter.thread
                and conversation.channel == voter.channel)

    async def of_conversation(self, conversation_id: str) -> list[Vote]:
        raw = await self.store.redis.hvals(self.key(conversation_id))
        return sorted((Vote.model_validate_json(v) for v in raw), key=lambda v: v.at)

    async def recent_comments(self, start: datetime, end: datetime, dims_filter: tuple) -> list[dict]:
        """Comments cast in [start, end] (of the last ``RECENT_COMMENTS``), newest first, at most
        ``COMMENTS_LISTED`` (each one read costs the report a JSON parse: it stops when it has enough)."""
        rows, seen = [], set()
        for raw in await self.store.redis.lrange(self.comments_key, 0, RECENT_COMMENTS - 1):
            if len(rows) == COMMENTS_LISTED:
                break
            vote = json.loads(raw)  # plain JSON: this list is read on every report
            if (vote["message_id"], vote["voter"]) in seen:  # a changed vote: only its newest comment stands
                continue
            seen.add((vote["message_id"], vote["voter"]))
            at = datetime.fromisoformat(vote["at"]).astimezone(UTC)
            if start <= at <= end and Dims.parse(vote["dims"]).matches(*dims_filter):
                rows.append({"conversation_id": vote["conversation_id"], "message_id": vote["message_id"],
                             "rating": vote["rating"], "comment": vote["comment"], "at": at.isoformat()})
        return rows

"""``GET /api/conversations/export``: conversations active in a range of days, with their messages,
outcome, ratings, tokens and cost, streamed as JSON lines or CSV, a batch of conversations at a time
(memory stays bounded whatever the number of conversations)."""

from __future__ import annotations

import asyncio
import csv
import io
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, time
from typing import Literal

from pydantic import BaseModel

from gateway.conversation.store import RedisStore
from gateway.core.models import Conversation, Message, TurnTrace
from gateway.insight.counters import Dims
from gateway.insight.feedback import Feedback, Vote
from gateway.insight.outcomes import Outcomes
from gateway.insight.prices import NANO, PriceTable

__all__ = ["BATCH", "CSV_COLUMNS", "ConversationExport", "Exporter"]

BATCH = 25  # conversations read (concurrently) and written out before the next are read
Format = Literal["jsonl", "csv"]
CSV_COLUMNS = ("conversation_id", "channel", "agent", "connection", "started_at", "last_activity_at", "outcome",
               "prompt_tokens", "completion_tokens", "cost", "message_id", "role", "created_at", "text", "rating",
               "comment")


class ConversationExport(BaseModel):
    id: str
    channel: str
    agent: str
    connection: str
    started_at: datetime
    last_activity_at: datetime
    ended_at: datetime | None
    outcome: list[str]
    prompt_tokens: int
    completion_tokens: int
    cost: float
    ratings: list[dict]
    messages: list[dict]


class Exporter:
    def __init__(self, store: RedisStore, outcomes: Outcomes, feedback: Feedback, prices: PriceTable) -> None:
        self.store = store
        self.outcomes = outcomes
        self.feedback = feedback
        self.prices = prices

    async def stream(self, first: date, last: date, fmt: Format) -> AsyncIterator[str]:
        if fmt == "csv":
            yield _csv_line(CSV_COLUMNS)
        async for conversation in self.conversations(first, last):
            if fmt == "jsonl":
                yield conversation.model_dump_json() + "\n"
                continue
            for message in conversation.messages or [{}]:
                yield _csv_line((conversation.id, conversation.channel, conversation.agent, conversation.connection,
                                 conversation.started_at.isoformat(), conversation.last_activity_at.isoformat(),
                                 " ".join(conversation.outcome), conversation.prompt_tokens,
                                 conversation.completion_tokens, conversation.cost, message.get("id", ""),
                                 message.get("role", ""), message.get("created_at", ""), message.get("text", ""),
                                 message.get("rating", ""), message.get("comment", "")))

    async def conversations(self, first: date, last: date) -> AsyncIterator[ConversationExport]:
        """Conversations whose newest message is in [first, last] (UTC days), newest first."""
        low = datetime.combine(first, time.min, tzinfo=UTC).timestamp()
        high = datetime.combine(last, time.max, tzinfo=UTC).timestamp()
        offset = 0
        while True:
            ids = await self.store.redis.zrevrangebyscore(self.store.key("convs"), high, low, start=offset, num=BATCH)
            if not ids:
                return
            offset += len(ids)
            for row in await asyncio.gather(*(self._one(raw.decode()) for raw in ids)):
                if row is not None:
                    yield row

    async def _one(self, conversation_id: str) -> ConversationExport | None:
        conversation, messages, traces, votes, flags = await asyncio.gather(
            self.store.get_conversation(conversation_id), self.store.conversation_messages(conversation_id),
            self.store.conversation_traces(conversation_id), self.feedback.of_conversation(conversation_id),
            self.store.redis.hgetall(self.outcomes.conversation_key(conversation_id)))
        if conversation is None:
            return None
        return _export(conversation, messages, traces, votes, {k.decode(): v.decode() for k, v in flags.items()},
                       self.prices)


def _export(conversation: Conversation, messages: list[Message], traces: list[TurnTrace], votes: list[Vote],
            flags: dict[str, str], prices: PriceTable) -> ConversationExport:
    dims = (Dims.parse(flags["dims"]) if "dims" in flags
            else Dims.of(None, conversation.channel, conversation.connection))
    prompt = completion = cost = 0
    for trace in traces:
        if trace.usage is not None:
            prompt += trace.usage.prompt_tokens
            completion += trace.usage.completion_tokens
            cost += prices.cost_nano(trace.model, trace.usage.prompt_tokens, trace.usage.completion_tokens) or 0
    by_message = {vote.message_id: vote for vote in votes}  # the newest vote on each (votes come oldest first)
    outcome = [name for name in ("handed_off", "unanswered", "resolved") if name in flags]
    if int(flags.get("down", "0")) > 0:
        outcome.append("rated_down")
    return ConversationExport(
        id=conversation.id, channel=conversation.channel, agent=dims.agent, connection=dims.connection,
        started_at=conversation.started_at, last_activity_at=conversation.last_activity_at,
        ended_at=conversation.ended_at, outcome=outcome, prompt_tokens=prompt, completion_tokens=completion,
        cost=round(cost / NANO, 9),
        ratings=[vote.model_dump(mode="json", exclude={"dims"}) for vote in votes],
        messages=[{"id": m.id, "role": m.role.value, "created_at": m.created_at.isoformat(), "text": m.text,
                   **({"rating": by_message[m.id].rating, "comment": by_message[m.id].comment or ""}
                      if m.id in by_message else {})} for m in messages])


def _csv_line(values) -> str:
    out = io.StringIO()
    csv.writer(out).writerow(values)
    return out.getvalue()

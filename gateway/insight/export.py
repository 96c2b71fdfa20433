"""``GET /api/conversations/export``: conversations active in a range of days, with their messages,
outcome, ratings, tokens and cost, streamed as JSON lines or CSV, a batch of conversations at a time
(memory stays bounded whatever the number of conversations)."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, time
from typing import Literal

from pydantic import BaseModel

from gateway.conversation.store import RedisStore
from gateway.core.models import Conversation, Message
from gateway.insight.counters import Dims
from gateway.insight.feedback import Feedback, Vote
from gateway.insight.outcomes import Outcomes
from gateway.insight.prices import NANO, PriceTable
from gateway.insight.trace_cost import TraceCost, turn_cost

__all__ = ["BATCH", "CSV_COLUMNS", "ConversationExport", "Exporter"]

BATCH = 100  # conversations read (in two pipelines) and written out before the next are read
MESSAGES = 500  # a conversation's newest messages exported (as the console shows them)
TRACES = 200  # and its newest turns' tokens
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
        """Conversations whose newest message is in [first, last] (UTC days), newest first, read ``BATCH`` at a
        time in two pipelined round trips on one connection (memory is one batch's, whatever the total)."""
        low = datetime.combine(first, time.min, tzinfo=UTC).timestamp()
        high: float | str = datetime.combine(last, time.max, tzinfo=UTC).timestamp()
        skip: set[bytes] = set()  # the previous page's last score's members, already written
        while True:
            page = await self.store.redis.zrevrangebyscore(self.store.key("convs"), high, low, start=0,
                                                           num=BATCH + len(skip), withscores=True)
            rows = [(member, score) for member, score in page if member not in skip]
            if not rows:
                return
            for row in await self._batch([member.decode() for member, _ in rows]):
                if row is not None:
                    yield row
            # The next page starts at the last score (a cursor, not an offset Redis would walk again), less the
            # members at that score already written.
            last = rows[-1][1]
            skip = {m for m, score in rows if score == last} | (skip if last == high else set())
            high = last

    async def _batch(self, ids: list[str]) -> list[ConversationExport | None]:
        key = self.store.key
        pipe = self.store.redis.pipeline(transaction=False)
        for conversation_id in ids:
            pipe.get(key("conv", conversation_id))
            pipe.zrange(key("conv", conversation_id, "msgs"), -MESSAGES, -1)
            pipe.lrange(key("conv", conversation_id, "traces"), -TRACES, -1)
            pipe.hvals(self.feedback.key(conversation_id))
            pipe.hgetall(self.outcomes.conversation_key(conversation_id))
        heads = await pipe.execute()
        pipe = self.store.redis.pipeline(transaction=False)
        for i in range(len(ids)):
            message_ids, trace_ids = heads[5 * i + 1], heads[5 * i + 2]
            pipe.mget([key("msg", m.decode()) for m in message_ids] or [key("msg", "-")])
            pipe.mget([key("trace", t.decode()) for t in trace_ids] or [key("trace", "-")])
        bodies = await pipe.execute()
        out: list[ConversationExport | None] = []
        for i in range(len(ids)):
            raw_conversation, _, _, raw_votes, raw_flags = heads[5 * i: 5 * i + 5]
            if raw_conversation is None:
                out.append(None)
                continue
            messages = [Message.model_validate_json(raw) for raw in bodies[2 * i] if raw]
            traces = [TraceCost.model_validate_json(raw) for raw in bodies[2 * i + 1] if raw]
            votes = sorted((Vote.model_validate_json(v) for v in raw_votes), key=lambda v: v.at)
            out.append(_export(Conversation.model_validate_json(raw_conversation), messages, traces, votes,
                               {k.decode(): v.decode() for k, v in raw_flags.items()}, self.prices))
        return out


def _export(conversation: Conversation, messages: list[Message], traces: list[TraceCost], votes: list[Vote],
            flags: dict[str, str], prices: PriceTable) -> ConversationExport:
    dims = (Dims.parse(flags["dims"]) if "dims" in flags
            else Dims.of(None, conversation.channel, conversation.connection))
    prompt = completion = cost = 0
    for trace in traces:
        p, c, priced, _ = turn_cost(trace, prices)
        prompt, completion, cost = prompt + p, completion + c, cost + priced
    by_message = {vote.message_id: vote for vote in votes}  # the newest vote on each (votes come oldest first)
    outcome = [name for name in ("handed_off", "unanswered", "resolved", "abandoned") if name in flags]
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

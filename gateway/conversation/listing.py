"""The conversation list (the console's and ``GET /api/conversations``): newest activity first,
filtered by channel, status, outcome and text, one page at a time — read from the store's conversation
index, the outcome index and the search index, never by loading every conversation."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from gateway.conversation.handoff import Handoff, Handoffs
from gateway.conversation.outcome_index import OUTCOMES, OutcomeIndex
from gateway.conversation.store import RedisStore
from gateway.core.models import Conversation

Status = Literal["bot", "waiting", "human", "ended"]
STATUSES: dict[str, str] = {
    "bot": "Bot answering", "waiting": "Waiting for an operator", "human": "Handed off", "ended": "Ended",
}
PAGE_SIZE = 50
MAX_OFFSET = 1_000_000  # Redis refuses a range start past 64 bits; no one pages this deep
SCAN_BATCH = 1000
MAX_HANDED_OFF = 10_000  # handed-off conversations a text filter looks through (there are never this many)


@dataclass(frozen=True)
class Filters:
    channel: str = ""
    status: str = ""
    text: str = ""
    offset: int = 0
    outcome: str = ""  # one of ``OUTCOMES`` ("": any)

    @classmethod
    def of(cls, params) -> Filters:
        try:
            offset = min(max(0, int(params.get("offset", "0"))), MAX_OFFSET)
        except ValueError:
            offset = 0
        status, outcome = params.get("status", ""), params.get("outcome", "")
        return cls(channel=params.get("channel", "")[:64], status=status if status in STATUSES else "",
                   text=params.get("q", "").strip()[:200], offset=offset,
                   outcome=outcome if outcome in OUTCOMES else "")


@dataclass(frozen=True)
class Row:
    conversation: Conversation
    persona: str
    last: dict
    handoff: Handoff | None

    @property
    def status(self) -> Status:
        if self.handoff is not None:
            return self.handoff.status
        return "ended" if self.conversation.ended_at else "bot"

    @property
    def last_at(self) -> str:
        at = self.last.get("at")
        return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S") if at else ""


class ConversationList:
    def __init__(self, store: RedisStore, handoffs: Handoffs) -> None:
        self.store = store
        self.handoffs = handoffs
        self.outcomes = OutcomeIndex(store)

    async def page(self, filters: Filters) -> tuple[list[Row], bool]:
        """One page of rows and whether there are more. A text filter finds the conversations in which
        any message has all its words (``ConversationSearch``), in the list's order."""
        store, text = self.store, filters.text
        if filters.status in ("waiting", "human"):
            ids = await store.search.ids(text, self.handoffs.index_key, 0, MAX_HANDED_OFF) if text \
                else await self.handoffs.listed()
            if filters.outcome:
                ids = await self.outcomes.having(filters.outcome, ids)
            rows = [r for r in await self._rows(ids) if self._matches(r, filters)]
        elif not filters.status and not (filters.outcome and filters.channel):
            # the index (the channel's or the outcome's; or the search, in its order) gives the page directly
            ids = await self._ids(filters, filters.offset, PAGE_SIZE + 1)
            rows = await self._rows(ids)
            return await self._with_personas(rows[:PAGE_SIZE]), len(ids) > PAGE_SIZE
        else:
            rows = await self._scan(filters)
        page = rows[filters.offset:filters.offset + PAGE_SIZE]
        return await self._with_personas(page), len(rows) > filters.offset + PAGE_SIZE


    async def _ids(self, filters: Filters, start: int, count: int) -> list[str]:
        """Newest first, the conversations of the filters' outcome or else channel (that have the filters' words)."""
        order = self.outcomes.key(filters.outcome) if filters.outcome else self.store.list_key(filters.channel or None)
        if filters.text:
            return await self.store.search.ids(filters.text, order, start, count)
        if filters.outcome:
            return await self.outcomes.ids(filters.outcome, start, count)
        return await self.store.recent_conversation_ids(start, count, filters.channel or None)


    async def _scan(self, filters: Filters) -> list[Row]:
        """Newest first, the rows that pass the filters ("bot" or "ended": the conversation and its handoff
        decide; an outcome with a channel: the outcome's index, filtered by channel), until one more than the
        page is found. Ids come a chunk at a time (one search each); their rows are read in rounds, each twice
        as many as the last."""
        wanted, found, start = filters.offset + PAGE_SIZE + 1, [], 0
        batch, chunk = wanted, min(4 * wanted, SCAN_BATCH)
        while len(found) < wanted:
            ids = await self._ids(filters, start, chunk)
            start += len(ids)
            for at in range(0, len(ids), batch) if ids else ():
                found.extend(r for r in await self._rows(ids[at:at + batch]) if self._matches(r, filters))
                if len(found) >= wanted:
                    break
                batch = min(2 * batch, SCAN_BATCH)
            if len(ids) < chunk:
                break
            chunk = min(2 * chunk, SCAN_BATCH)
        return found


    async def _rows(self, ids: list[str]) -> list[Row]:
        found = await self.store.conversation_rows(ids)
        handoffs = await self.handoffs.many([c.id for c, _ in found])
        return [Row(conversation=c, persona="", last=last, handoff=handoffs.get(c.id)) for c, last in found]


    @staticmethod
    def _matches(row: Row, filters: Filters) -> bool:
        if filters.channel and row.conversation.channel != filters.channel:
            return False
        return not (filters.status and row.status != filters.status)


    async def _with_personas(self, rows: list[Row]) -> list[Row]:
        if not rows:
            return rows
        personas = await self.store.get_personas([r.conversation.persona_id for r in rows])
        names = [p.shown_name if p else None for p in personas]
        return [Row(r.conversation, name or r.conversation.persona_id[:8], r.last, r.handoff)
                for r, name in zip(rows, names, strict=True)]

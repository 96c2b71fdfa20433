"""The conversation search index: every stored message's words, each pointing at the conversations
that used it, kept as messages are stored (``RedisStore`` queues ``index_into`` in the same round
trip), so a search reads a few sorted sets and never scans conversations.

Words are case- and accent-folded runs of letters and digits (``words``). Under
``search:w:<word>`` a sorted set holds the conversations that said the word (scored by when they
last did); ``search:words`` is the vocabulary, kept in lexical order, so a query word of
``MIN_PREFIX`` characters or more also finds the words it begins ("kil" finds "kiln"). A query finds
the conversations that have all its words, ordered and paged by an index of the caller's choosing
(the conversation list's, a channel's, the handed-off ones'): a conversation that left that index can
no longer be found, whatever stale word entries remain. ``forget`` removes a conversation's words.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import unicodedata
from collections.abc import Callable, Iterable

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from gateway.core.models import Message

MIN_PREFIX = 3  # shorter query words match whole words only
PREFIX_WORDS = 100  # at most this many vocabulary words are tried for one query word's prefix
MAX_WORD_CHARS = 40
MAX_MESSAGE_WORDS = 1000  # distinct words indexed per message (a pasted document is not a conversation)
MAX_QUERY_WORDS = 8
MATERIALIZE_LIMIT = 2000  # a query whose rarest word is in more conversations reads the order index instead
BACKFILL_BATCH = 200  # conversations read per round trip while indexing those stored before the index
INDEX_VERSION = "1"
_WORD = re.compile(r"\w+")
log = logging.getLogger(__name__)

# Index one message. ARGV: word key prefix, vocabulary key, conversation id, time, then the words.
_INDEX = """
for i = 5, #ARGV do
  redis.call('ZADD', ARGV[1] .. ARGV[i], ARGV[4], ARGV[3])
  redis.call('ZADD', ARGV[2], 'NX', 0, ARGV[i])
end
return #ARGV - 4
"""

# Forget a conversation's words. ARGV: word key prefix, vocabulary key, conversation id, then the words.
_FORGET = """
for i = 4, #ARGV do
  local key = ARGV[1] .. ARGV[i]
  redis.call('ZREM', key, ARGV[3])
  if redis.call('EXISTS', key) == 0 then redis.call('ZREM', ARGV[2], ARGV[i]) end
end
return 0
"""

# The conversations having every query word (or a word it begins), in ARGV[4]'s order, highest score first.
# ARGV: word key prefix, vocabulary key, scratch key prefix, order key, start, count, min prefix, max prefix
# words, materialize limit, then the query words. Answers the page's ids.
# When the rarest word is used by few conversations (<= the limit), the sets are intersected at once (a
# cost of that few). Otherwise every word is common, so the order index is read newest first, a slice at a
# time, keeping the ids every word's sets hold, until the page is full: a few slices, where intersecting
# would build and sort a set of thousands. The scratch keys are gone before the script ends (a script runs
# alone, so fixed names serve every caller).
_SEARCH = """
local wp, vocab, tmp, order = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local start, count = tonumber(ARGV[5]), tonumber(ARGV[6])
local minp, maxw, limit = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local scratch, terms = {}, {}
for i = 10, #ARGV do
  local word = ARGV[i]
  local keys, size = {}, 0
  local function add(key)
    local n = redis.call('ZCARD', key)
    if n > 0 then keys[#keys + 1] = key; size = size + n end
  end
  add(wp .. word)
  if #word >= minp then
    for _, more in ipairs(redis.call('ZRANGEBYLEX', vocab, '(' .. word, '[' .. word .. '\\255', 'LIMIT', 0, maxw)) do
      add(wp .. more)
    end
  end
  if size == 0 then
    if #scratch > 0 then redis.call('DEL', unpack(scratch)) end
    return {}
  end
  if #keys > 4 then  -- many words begin with it: their union, once, instead of a look-up in each
    local union = tmp .. i
    redis.call('ZUNIONSTORE', union, #keys, unpack(keys))
    scratch[#scratch + 1] = union
    keys = {union}
  end
  terms[#terms + 1] = {keys = keys, size = size}
end
table.sort(terms, function(a, b) return a.size < b.size end)
local found = {}
if terms[1].size <= limit then
  local hits = tmp .. 'hits'
  local args = {hits, 0, order}
  for _, term in ipairs(terms) do
    local key = term.keys[1]
    if #term.keys > 1 then
      key = tmp .. 'u' .. #args
      redis.call('ZUNIONSTORE', key, #term.keys, unpack(term.keys))
      scratch[#scratch + 1] = key
    end
    args[#args + 1] = key
  end
  local sets = #args - 2
  args[2] = sets
  args[#args + 1] = 'WEIGHTS'
  args[#args + 1] = 1
  for i = 2, sets do args[#args + 1] = 0 end
  redis.call('ZINTERSTORE', unpack(args))
  scratch[#scratch + 1] = hits
  found = redis.call('ZREVRANGE', hits, start, start + count - 1)
else
  local want, at, slice, kept = start + count, 0, 500, {}
  while #kept < want do
    local ids = redis.call('ZREVRANGE', order, at, at + slice - 1)
    if #ids == 0 then break end
    at = at + #ids
    for _, term in ipairs(terms) do
      local has = {}
      for _, key in ipairs(term.keys) do
        local scores = redis.call('ZMSCORE', key, unpack(ids))
        for j = 1, #ids do if scores[j] then has[j] = true end end
      end
      local left = {}
      for j = 1, #ids do if has[j] then left[#left + 1] = ids[j] end end
      ids = left
      if #ids == 0 then break end
    end
    for _, id in ipairs(ids) do kept[#kept + 1] = id end
  end
  for j = start + 1, math.min(want, #kept) do found[#found + 1] = kept[j] end
end
if #scratch > 0 then redis.call('DEL', unpack(scratch)) end
return found
"""


def words(text: str, limit: int = MAX_MESSAGE_WORDS) -> list[str]:
    """The distinct words of ``text`` as the index keeps them: case and accents folded ("Café" -> "cafe")."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(c for c in folded if not unicodedata.combining(c))
    found = dict.fromkeys(w for w in _WORD.findall(plain) if len(w) <= MAX_WORD_CHARS)
    return list(found)[:limit]


class ConversationSearch:
    def __init__(self, redis: Redis, key: Callable[..., str], *, materialize_limit: int = MATERIALIZE_LIMIT) -> None:
        """``key``: the store's key builder (``RedisStore.key``), whose layout the backfill reads."""
        self.redis = redis
        self.materialize_limit = materialize_limit
        self._key = key
        self._words_key = key("search", "words")
        self._word_prefix = key("search", "w", "")
        self._scratch = key("search", "tmp", "")
        self._backfilling: asyncio.Task | None = None
        self._search = redis.register_script(_SEARCH)
        self._forget = redis.register_script(_FORGET)

    def index_into(self, pipe: Pipeline, conversation_id: str, at: float, texts: Iterable[str]) -> None:
        """Queue, in ``pipe``, the words of ``texts`` as said in ``conversation_id`` at ``at``."""
        found = list(dict.fromkeys(w for text in texts for w in words(text)))
        if found:
            pipe.eval(_INDEX, 0, self._word_prefix, self._words_key, conversation_id, repr(at), *found)

    async def ids(self, text: str, order_key: str, start: int, count: int) -> list[str]:
        """One page of the conversations whose messages have every word of ``text`` (or a word it begins),
        in ``order_key``'s order (highest score first); none when ``text`` has no words."""
        query = words(text, MAX_QUERY_WORDS)
        if not query or count <= 0:
            return []
        found = await self._search(args=[
            self._word_prefix, self._words_key, self._scratch, order_key, start, count, MIN_PREFIX, PREFIX_WORDS,
            self.materialize_limit, *query])
        return [raw.decode() for raw in found]

    async def forget(self, conversation_id: str, texts: Iterable[str]) -> None:
        """Remove ``conversation_id`` from the index entries of the words of ``texts`` (its messages)."""
        found = list(dict.fromkeys(w for text in texts for w in words(text)))
        if found:
            await self._forget(args=[self._word_prefix, self._words_key, conversation_id, *found])

    # -- conversations stored before the index ---------------------------------------------------------
    async def start_backfill(self) -> None:
        """Index the conversations stored before the index, in the background (the gateway's start);
        with none stored, the index is complete at once."""
        try:
            if not await self.needs_backfill():
                return
            if not await self.redis.exists(self._key("convs")):
                await self.redis.set(self._key("search", "built"), INDEX_VERSION)
                return
        except Exception as exc:  # Redis down at start: /readyz says so; the next start tries again
            log.warning("conversation search: could not check the index at start: %s", exc)
            return
        self._backfilling = asyncio.create_task(self._backfill_logged(), name="conversation-search-backfill")

    async def stop_backfill(self) -> None:
        """Stop a backfill under way; the next start does it again."""
        if self._backfilling is not None:
            self._backfilling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._backfilling
            self._backfilling = None

    async def _backfill_logged(self) -> None:
        try:
            if indexed := await self.backfill():
                log.info("conversation search: indexed the messages of %d conversation(s) stored before it", indexed)
        except Exception:  # Redis down at start: the next start tries again
            log.exception("conversation search: could not index the conversations stored before it")

    async def needs_backfill(self) -> bool:
        return await self.redis.get(self._key("search", "built")) != INDEX_VERSION.encode()

    async def backfill(self, lease_s: int = 3600) -> int:
        """Index every listed conversation from its stored messages: once per index version, by one
        process at a time (its claim lapses after ``lease_s`` should it stop half way). How many
        conversations it indexed."""
        claim = self._key("search", "building")
        if not await self.needs_backfill() or not await self.redis.set(claim, "1", nx=True, ex=lease_s):
            return 0
        try:
            return await self._index_stored(claim)
        except asyncio.CancelledError:  # stopping: let the next start claim it at once
            await asyncio.shield(self.redis.delete(claim))
            raise

    async def _index_stored(self, claim: str) -> int:
        key = self._key
        # Listed once: a conversation that moves to the list's end meanwhile (a new message) is not skipped.
        everyone = [raw.decode() for raw in await self.redis.zrange(key("convs"), 0, -1)]
        for done in range(0, len(everyone), BACKFILL_BATCH):
            batch = everyone[done:done + BACKFILL_BATCH]
            pipe = self.redis.pipeline(transaction=False)
            for conversation_id in batch:
                pipe.zrange(key("conv", conversation_id, "msgs"), 0, -1)
            listed = await pipe.execute()
            pipe = self.redis.pipeline(transaction=False)
            for message_ids in listed:
                pipe.mget([key("msg", m.decode()) for m in message_ids] or [key("msg", "-")])
            stored = await pipe.execute()
            pipe = self.redis.pipeline(transaction=False)
            for conversation_id, raws in zip(batch, stored, strict=True):
                messages = [Message.model_validate_json(raw) for raw in raws if raw]
                self.index_into(pipe, conversation_id, max((m.created_at.timestamp() for m in messages), default=0.0),
                                [conversation_id, *(f"{m.text} {m.persona_id}" for m in messages)])
            await pipe.execute()
            await asyncio.sleep(0)  # a long backfill leaves turns their share of the loop
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(key("search", "built"), INDEX_VERSION)
        pipe.delete(claim, key("convs", "search"))  # the last-message-only index this one replaced
        await pipe.execute()
        return len(everyone)

"""The semantic cache of retrieval results (seed 002), in Redis so every replica shares it.

An entry is a finished search — its hits, after LLM selection and every control — keyed by the query's
embedding (the last message plus its recent-history window, as ``QueryShape`` combines them) inside a
*scope*: the strategy, the knowledge bases, k and the controls that decide a result. A lookup is a hit when
an entry of the same scope has cosine >= the similarity threshold.

Entries expire after a TTL and the oldest go past ``max_entries``. Each entry records a hash of every
topic it returned; before a hit is served those topics are read again, and an entry whose topics changed
or were deleted is dropped and counted ``stale`` — an edited topic is never served from the cache.
That cannot see a topic that was *added* (an entry never lists what it did not find), so every write to a
knowledge base (topic, document, crawl, append, import, delete) also counts one in ``writes``, and the
searched bases' counts are part of the scope: an entry made before a write is never looked up again.
The counts are read in the same round trip as the new ids. An entry larger than ``max_entry_bytes``
is not stored (logged), so no Redis value of the cache grows with a document's chunk sizes.

Layout (prefix ``sb:<agent>:semcache``): ``e:<id>`` the entry (JSON, with a TTL); ``index`` a sorted set of
ids by insertion number (``seq``); ``epoch`` changes on clear; ``writes`` a hash of write counts per
knowledge base; ``stats`` a hash of hit / miss / stale
counts. Each process mirrors the vectors in memory and reads only the ids added since its last look, so a
lookup costs one round trip for new ids, one matrix product over its scope's entries and, on a hit of an entry
this process has not parsed yet, one GET. The process keeps the last ``PARSED_ENTRIES`` entries it stored or
read, parsed (an entry never changes once stored: a write makes a new scope, a clear a new epoch), and its
hit / miss counts ride on its next lookup's round trip (``stats`` sends them first).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from redis.asyncio import Redis

from rag_core.retrieval import SearchResult
from rag_core.topic import Topic

STATS = ("hit", "miss", "stale", "error")
PARSED_ENTRIES = 256
log = logging.getLogger(__name__)


def topic_digest(topic: Topic) -> str:
    return hashlib.sha256(topic.model_dump_json().encode("utf-8")).hexdigest()[:32]


@dataclass
class _Mirror:
    """The vectors of the entries this process knows, in rows ``[0, size)`` of a buffer that grows by
    doubling (appending never copies the whole matrix per entry), each row's scope as a number beside it:
    a lookup compares its vector with its own scope's rows only, however many other scopes the cache holds."""

    epoch: str | None = None
    seq: float = 0.0
    ids: list[str] = field(default_factory=list)
    known: set[str] = field(default_factory=set)  # ``ids`` as a set
    created: list[float] = field(default_factory=list)
    buffer: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    scope_codes: dict[str, int] = field(default_factory=dict)
    codes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def matrix(self) -> np.ndarray:
        return self.buffer[: len(self.ids)]

    def rows_of(self, scope: str) -> np.ndarray:
        """The row numbers of ``scope``'s entries."""
        code = self.scope_codes.get(scope)
        if code is None:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(self.codes[: len(self.ids)] == code)

    def add(self, rows: list[np.ndarray], ids: list[str], scopes: list[str], created: list[float]) -> None:
        need = len(self.ids) + len(rows)
        if self.buffer.shape[0] < need or self.buffer.shape[1] != rows[0].shape[0]:
            size = max(need, 2 * self.buffer.shape[0], 64)
            grown = np.zeros((size, rows[0].shape[0]), dtype=np.float32)
            codes = np.zeros(size, dtype=np.int64)
            if self.ids and self.buffer.shape[1] == rows[0].shape[0]:
                grown[: len(self.ids)] = self.matrix
                codes[: len(self.ids)] = self.codes[: len(self.ids)]
            elif self.ids:  # another embedding size: the old rows cannot be compared any more
                self.ids, self.created, self.known = [], [], set()
            self.buffer, self.codes = grown, codes
        start = len(self.ids)
        self.buffer[start: start + len(rows)] = np.vstack(rows)
        self.codes[start: start + len(rows)] = [self.scope_codes.setdefault(s, len(self.scope_codes)) for s in scopes]
        self.ids += ids
        self.known.update(ids)
        self.created += created

    def drop(self, entry_id: str) -> None:
        if entry_id in self.known:
            self.known.discard(entry_id)
            i = self.ids.index(entry_id)
            last = len(self.ids) - 1
            self.buffer[i: last] = self.buffer[i + 1: last + 1]
            self.codes[i: last] = self.codes[i + 1: last + 1]
            del self.ids[i], self.created[i]


@dataclass(frozen=True)
class CachedResult:
    entry_id: str
    result: SearchResult
    digests: dict[str, str]
    similarity: float


@dataclass(frozen=True)
class CacheLookup:
    scope: str  # the scope with the searched bases' write counts: where a miss's result is stored
    found: CachedResult | None


# An entry and its place in the index in one round trip. KEYS: seq, entry, index. ARGV: blob, ttl s, entry id.
# Answers how many entries the index holds.
_STORE = """
local seq = redis.call('INCR', KEYS[1])
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
redis.call('ZADD', KEYS[3], seq, ARGV[3])
return redis.call('ZCARD', KEYS[3])
"""


class SemanticCache:
    def __init__(self, redis: Redis, prefix: str, *, ttl_s: int, max_entries: int,
                 max_entry_bytes: int = 256 * 1024) -> None:
        self.redis = redis
        self.prefix = f"{prefix}:semcache"
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.max_entry_bytes = max_entry_bytes
        self._mirror = _Mirror()
        self._store = redis.register_script(_STORE)
        # entry id -> (result as JSON data, digests); validated again per hit, so no caller shares its objects
        self._parsed: OrderedDict[str, tuple[dict, dict[str, str]]] = OrderedDict()
        self._own: dict[str, tuple[np.ndarray, str, float]] = {}  # stored here, not yet in the mirror
        self._counts: Counter[str] = Counter()  # not yet sent

    def _keep_parsed(self, entry_id: str, result: dict, digests: dict[str, str]) -> None:
        self._parsed[entry_id] = (result, digests)
        self._parsed.move_to_end(entry_id)
        while len(self._parsed) > PARSED_ENTRIES:
            self._parsed.popitem(last=False)

    def _send_counts(self, pipe) -> None:
        for outcome, n in self._counts.items():
            pipe.hincrby(f"{self.prefix}:stats", outcome, n)
        self._counts.clear()

    def _entry_key(self, entry_id: str) -> str:
        return f"{self.prefix}:e:{entry_id}"

    async def _sync(self, kbs: Sequence[str]) -> list[int]:
        """Bring the in-process mirror up to date with entries other processes (or this one) added;
        the write counts of ``kbs``."""
        mirror = self._mirror
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.get(f"{self.prefix}:epoch")
            pipe.zrangebyscore(f"{self.prefix}:index", f"({mirror.seq}", "+inf", withscores=True)
            self._send_counts(pipe)
            if kbs:
                pipe.hmget(f"{self.prefix}:writes", list(kbs))
            epoch, added, *rest = await pipe.execute()
        writes = [int(n or 0) for n in rest[-1]] if kbs else []
        epoch = epoch.decode() if isinstance(epoch, bytes) else epoch
        if epoch != mirror.epoch or len(mirror.ids) > 2 * self.max_entries:  # cleared, or evictions piled up
            if epoch != mirror.epoch:
                self._parsed.clear()
                self._own.clear()
            mirror = self._mirror = _Mirror(epoch=epoch)
            added = await self.redis.zrangebyscore(f"{self.prefix}:index", "-inf", "+inf", withscores=True)
        if not added:
            return writes
        ids = [(m.decode() if isinstance(m, bytes) else m) for m, _ in added]
        rows, scopes, kept, created = [], [], [], []
        own = {i: self._own.pop(i) for i in ids if i in self._own}  # taken before the await: syncs overlap
        unknown = [i for i in ids if i not in own]
        raw = dict(zip(unknown, await self.redis.mget([self._entry_key(i) for i in unknown]), strict=True)) \
            if unknown else {}
        for entry_id in ids:
            if entry_id in mirror.known:  # a concurrent sync added it meanwhile
                continue
            if entry_id in own:
                vector, scope, made = own[entry_id]
            else:
                blob = raw[entry_id]
                if blob is None:
                    continue
                entry = json.loads(blob)
                vector, scope, made = np.frombuffer(base64.b64decode(entry["vector"]), dtype=np.float32), \
                    entry["scope"], entry["created"]
                self._keep_parsed(entry_id, entry["result"], entry["digests"])
            rows.append(vector)
            scopes.append(scope)
            kept.append(entry_id)
            created.append(made)
        if len(self._own) > PARSED_ENTRIES:  # stored here but evicted before any sync saw them
            self._own.clear()
        mirror.seq = max(mirror.seq, max(score for _, score in added))
        if rows:
            mirror.add(rows, kept, scopes, created)
        return writes

    async def written(self, kb: str) -> None:
        """A write to ``kb`` landed: every entry made before it stops being looked up."""
        await self.redis.hincrby(f"{self.prefix}:writes", kb, 1)

    async def lookup(self, scope: str, vector: Sequence[float], threshold: float,
                     kbs: Sequence[str] = ()) -> CacheLookup:
        """The closest entry of ``scope`` (as it stands after the last write to ``kbs``) at ``threshold``."""
        names = sorted(kbs)
        writes = await self._sync(names)
        if names:
            scope = f"{scope}|" + ",".join(f"{n}={w}" for n, w in zip(names, writes, strict=True))
        return CacheLookup(scope, await self._closest(scope, vector, threshold))

    async def _closest(self, scope: str, vector: Sequence[float], threshold: float) -> CachedResult | None:
        mirror = self._mirror
        rows = mirror.rows_of(scope)
        if not len(rows):
            return None
        query = np.asarray(vector, dtype=np.float32)
        query /= max(float(np.linalg.norm(query)), 1e-12)
        # Few rows: copy them out; most of the matrix: one product over all of it, then pick (no copy).
        similarity = mirror.matrix[rows] @ query if 4 * len(rows) < len(mirror.ids) else (mirror.matrix @ query)[rows]
        close = np.flatnonzero(similarity >= threshold)  # usually none or a few: sort only those
        oldest = time.time() - self.ttl_s
        for j in close[np.argsort(-similarity[close])]:
            i = int(rows[j])
            if mirror.created[i] < oldest:  # rows are this scope's only
                continue
            entry_id = mirror.ids[i]
            parsed = self._parsed.get(entry_id)
            if parsed is None:
                blob = await self.redis.get(self._entry_key(entry_id))
                if blob is None:  # expired, evicted or invalidated elsewhere
                    mirror.drop(entry_id)
                    return None
                entry = json.loads(blob)
                parsed = entry["result"], entry["digests"]
            self._keep_parsed(entry_id, *parsed)
            return CachedResult(entry_id, SearchResult.model_validate(parsed[0]), parsed[1], float(similarity[j]))
        return None

    async def store(self, scope: str, vector: Sequence[float], result: SearchResult, digests: dict[str, str]) -> bool:
        """Keep ``result`` under ``scope`` (as ``lookup`` gave it); False when it is over the size cap."""
        query = np.asarray(vector, dtype=np.float32)
        query /= max(float(np.linalg.norm(query)), 1e-12)
        entry_id = uuid.uuid4().hex
        entry = {
            "scope": scope, "vector": base64.b64encode(query.tobytes()).decode(), "created": time.time(),
            "digests": digests, "result": result.model_dump(mode="json"),
        }
        blob = json.dumps(entry)
        if len(blob) > self.max_entry_bytes:
            log.warning("semantic cache: an entry of %d bytes (%d hits) is over the %d-byte cap, not stored",
                        len(blob), len(result.hits), self.max_entry_bytes)
            return False
        entries = int(await self._store(keys=[f"{self.prefix}:seq", self._entry_key(entry_id), f"{self.prefix}:index"],
                                        args=[blob, self.ttl_s, entry_id]))
        self._own[entry_id] = (query, scope, entry["created"])  # the next sync need not read it back
        self._keep_parsed(entry_id, entry["result"], digests)
        extra = entries - self.max_entries
        if extra > 0:  # the oldest go
            gone = await self.redis.zpopmin(f"{self.prefix}:index", extra)
            if gone:
                await self.redis.delete(*(self._entry_key(m.decode() if isinstance(m, bytes) else m)
                                          for m, _ in gone))
        return True

    async def invalidate(self, entry_id: str) -> None:
        self._mirror.drop(entry_id)
        self._parsed.pop(entry_id, None)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(self._entry_key(entry_id))
            pipe.zrem(f"{self.prefix}:index", entry_id)
            await pipe.execute()

    def count(self, outcome: str) -> None:
        """Counted here; sent with this process's next lookup (or ``stats``)."""
        self._counts[outcome] += 1

    async def stats(self) -> dict[str, int]:
        async with self.redis.pipeline(transaction=False) as pipe:
            self._send_counts(pipe)
            pipe.zcard(f"{self.prefix}:index")
            pipe.hgetall(f"{self.prefix}:stats")
            *_, entries, counts = await pipe.execute()
        out = {"entries": int(entries)}
        for name in STATS:
            out[name] = int(counts.get(name.encode(), counts.get(name, 0)) or 0)
        looked = out["hit"] + out["miss"] + out["stale"]
        out["hit_rate"] = round(out["hit"] / looked, 4) if looked else 0.0
        return out

    async def clear(self) -> int:
        """Drop every entry (every process's mirror starts over); how many there were."""
        ids = await self.redis.zrange(f"{self.prefix}:index", 0, -1)
        async with self.redis.pipeline(transaction=True) as pipe:
            for m in ids:
                pipe.delete(self._entry_key(m.decode() if isinstance(m, bytes) else m))
            pipe.delete(f"{self.prefix}:index", f"{self.prefix}:stats")
            pipe.set(f"{self.prefix}:epoch", uuid.uuid4().hex)
            await pipe.execute()
        self._mirror = _Mirror()
        self._parsed.clear()
        self._own.clear()
        self._counts.clear()
        return len(ids)

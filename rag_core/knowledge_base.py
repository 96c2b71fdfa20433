"""Knowledge-base topics in one Qdrant collection per agent: a named dense vector, a named
BM25 sparse vector with the IDF modifier, and the topic fields as payload.

Only ``rag_context`` topics carry vectors, so vector search sees exactly the retrieval pool
without a payload filter (and the IDF statistics describe that pool); other topics are
stored payload-only and reachable by source."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict
from qdrant_client import QdrantClient, models

from rag_core.encoders import DenseEncoder
from rag_core.errors import EncoderUnavailable
from rag_core.pool_index import PoolIndex
from rag_core.qdrant_calls import QdrantCalls
from rag_core.sparse import SparseEncoder
from rag_core.topic import RAG_CONTEXT_LABEL, ScoredTopic, Topic, topic_point_id

log = logging.getLogger(__name__)

MAIN_KB = "main"
DENSE_VECTOR = "dense"
POOL_COUNT_TTL_S = 5.0  # another process's first topic is seen within this long (server mode)
SPARSE_VECTOR = "bm25"
_T = TypeVar("_T")


class UpsertReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    created: list[str]
    updated: list[str]
    unchanged: list[str]
    embedded: int


class TopicPage(BaseModel):
    model_config = ConfigDict(frozen=True)

    topics: list[Topic]
    next_offset: str | None


def open_qdrant(url: str | None, path: Path) -> QdrantClient:
    """A server client for ``url``, in-process memory for ``":memory:"``, else local files."""
    if url == ":memory:":
        return QdrantClient(":memory:")
    if url:
        return QdrantClient(url=url)
    path.mkdir(parents=True, exist_ok=True)
    return QdrantClient(path=str(path))


def collection_name(agent_id: str, kb_name: str) -> str:
    """``main`` keeps the collection name it had before knowledge bases had names."""
    return f"kb_{agent_id}" if kb_name == MAIN_KB else f"kb_{agent_id}__{kb_name}"


def dense_text(topic: Topic, max_chars: int) -> str:
    # MiniLM reads ~256 word pieces: title and facts first, then as much body as fits.
    text = "\n".join([topic.title, *topic.facts, topic.summary])
    return text[:max_chars]


def sparse_text(topic: Topic) -> str:
    return "\n".join([topic.title, *topic.facts, topic.summary])


class KnowledgeBase:
    def __init__(
        self,
        client: QdrantClient,
        agent_id: str = "default",
        *,
        name: str = MAIN_KB,
        dense: DenseEncoder | None = None,
        sparse: SparseEncoder | None = None,
        dense_max_chars: int = 300,
    ) -> None:
        self._client = client
        self.name = name
        self.collection_name = collection_name(agent_id, name)
        self._dense = dense
        self._sparse = sparse or SparseEncoder()
        self._dense_max_chars = dense_max_chars
        self._calls = QdrantCalls(client)
        self._local = self._calls.local
        self._ready_lock = asyncio.Lock()
        self._ready = False
        self._version = 0
        self._snapshot: tuple[int, PoolIndex] | None = None
        self._pool_count: tuple[int, float, int] | None = None  # (version, when, count) against a server
        # Awaited with the base's name after every write lands (the semantic cache's write counter).
        self.on_write: Callable[[str], Awaitable[None]] | None = None

    @property
    def dense_enabled(self) -> bool:
        return self._dense is not None

    # -- plumbing --------------------------------------------------------------------------

    async def _run(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        return await self._calls.run(fn, *args, **kwargs)

    async def ensure_collection(self) -> None:
        """Create the collection if missing; detect a dense vector the encoder cannot serve."""
        if self._ready:
            return
        async with self._ready_lock:
            if self._ready:
                return
            dimension = await self._dense_dimension()
            exists = await self._run(self._client.collection_exists, self.collection_name)
            if not exists:
                await self._run(self._create_collection, dimension)
            else:
                await self._check_dense_compatible(dimension)
            self._ready = True

    async def _dense_dimension(self) -> int | None:
        if self._dense is None:
            return None
        try:
            return await self._dense.dimension()
        except EncoderUnavailable as exc:
            log.warning("dense encoder unavailable (%s); knowledge base runs sparse-only", exc)
            self._dense = None
            return None

    def _create_collection(self, dimension: int | None) -> None:
        vectors = (
            {DENSE_VECTOR: models.VectorParams(size=dimension, distance=models.Distance.COSINE)} if dimension else {}
        )
        self._client.create_collection(
            self.collection_name,
            vectors_config=vectors,
            sparse_vectors_config={SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        if not self._local:
            for field in ("source", "labels"):
                self._client.create_payload_index(self.collection_name, field, models.PayloadSchemaType.KEYWORD)

    async def _check_dense_compatible(self, dimension: int | None) -> None:
        if dimension is None:
            return
        info = await self._run(self._client.get_collection, self.collection_name)
        vectors = info.config.params.vectors
        params = vectors.get(DENSE_VECTOR) if isinstance(vectors, dict) else None
        if params is None or params.size != dimension:
            log.warning(
                "collection %s has no %d-d dense vector; running sparse-only until re-created",
                self.collection_name,
                dimension,
            )
            self._dense = None

    async def drop(self) -> None:
        """Delete the collection and everything in it."""
        await self._run(self._client.delete_collection, self.collection_name)
        self._ready = False
        await self._wrote()

    async def ping(self) -> None:
        await self._run(self._client.get_collections)

    # -- writes ----------------------------------------------------------------------------

    @property
    def _signature(self) -> str:
        dense = self._dense.signature if self._dense else "none"
        return f"{self._sparse.signature}|{dense}|chars={self._dense_max_chars}"

    async def upsert_many(self, topics: Iterable[Topic], *, reuse_label: str | None = None) -> UpsertReport:
        """Create or update topics; only topics whose indexed text changed are embedded.

        With ``reuse_label``, a topic whose text is already indexed under another source carrying that
        label takes those vectors instead of being embedded again (a document's chunk that moved)."""
        await self.ensure_collection()
        batch = {topic.source: topic for topic in topics}  # the last copy of a source wins
        if not batch:
            return UpsertReport(created=[], updated=[], unchanged=[], embedded=0)
        existing = await self._existing_payloads(list(batch))
        signature = self._signature
        to_embed: list[Topic] = []
        payload_only: list[Topic] = []
        created, updated, unchanged = [], [], []
        for source, topic in batch.items():
            old = existing.get(source)
            if old is not None:
                topic = topic.model_copy(update={"created_at": _topic(old).created_at})
                batch[source] = topic
            digest = topic.content_hash(signature)
            if old is None:
                created.append(source)
                to_embed.append(topic)
            elif old.get("content_hash") != digest:
                updated.append(source)
                to_embed.append(topic)
            elif _payload(topic, digest) != old:
                updated.append(source)
                payload_only.append(topic)
            else:
                unchanged.append(source)
        donors = await self._vector_donors(reuse_label) if reuse_label and to_embed else {}
        points = await self._points(to_embed, donors)
        embedded = sum(1 for t in to_embed if t.in_rag_pool and t.content_hash(signature) not in donors)
        if points:
            await self._run(self._client.upsert, self.collection_name, points=points)
        for topic in payload_only:
            await self._run(
                self._client.overwrite_payload,
                self.collection_name,
                payload=_payload(topic, topic.content_hash(signature)),
                points=[topic.point_id],
            )
        if points or payload_only:
            await self._wrote()
        return UpsertReport(created=created, updated=updated, unchanged=unchanged, embedded=embedded)

    async def upsert(self, topic: Topic) -> UpsertReport:
        return await self.upsert_many([topic])

    async def _existing_payloads(self, sources: Sequence[str]) -> dict[str, dict[str, Any]]:
        records = await self._run(
            self._client.retrieve,
            self.collection_name,
            ids=[topic_point_id(s) for s in sources],
            with_payload=True,
        )
        return {r.payload["source"]: r.payload for r in records if r.payload}

    async def _scroll(self, label: str | None, payload: Any, vectors: bool = False) -> AsyncIterator[Any]:
        """Every stored point carrying ``label`` (all points for None), page by page."""
        offset: Any = None
        while True:
            records, offset = await self._run(
                self._client.scroll, self.collection_name, scroll_filter=_label_filter(label), limit=512,
                offset=offset, with_payload=payload, with_vectors=vectors,
            )
            for record in records:
                yield record
            if offset is None:
                return

    async def _vector_donors(self, label: str) -> dict[str, dict[str, Any]]:
        """content hash -> the vectors already stored for it, over the topics carrying ``label``."""
        return {
            record.payload["content_hash"]: record.vector
            async for record in self._scroll(label, models.PayloadSelectorInclude(include=["content_hash"]), True)
            if record.payload and isinstance(record.vector, dict) and SPARSE_VECTOR in record.vector
        }

    async def _points(
        self, topics: Sequence[Topic], donors: dict[str, dict[str, Any]] | None = None
    ) -> list[models.PointStruct]:
        if not topics:
            return []
        donors = donors or {}
        signature = self._signature
        pooled = [t for t in topics if t.in_rag_pool and t.content_hash(signature) not in donors]
        dense_vectors: dict[str, list[float]] = {}
        if self._dense is not None and pooled:
            texts = [dense_text(t, self._dense_max_chars) for t in pooled]
            embedded = await self._dense.embed_documents(texts)
            dense_vectors = {t.source: v for t, v in zip(pooled, embedded, strict=True)}
        points = []
        for topic in topics:
            vector: dict[str, Any] = {}
            donor = donors.get(topic.content_hash(signature)) if topic.in_rag_pool else None
            if donor is not None:
                vector = dict(donor)
            elif topic.in_rag_pool:
                vector[SPARSE_VECTOR] = self._sparse.encode_document(sparse_text(topic))
            if topic.source in dense_vectors:
                vector[DENSE_VECTOR] = dense_vectors[topic.source]
            points.append(
                models.PointStruct(
                    id=topic.point_id,
                    vector=vector,
                    payload=_payload(topic, topic.content_hash(self._signature)),
                )
            )
        return points

    async def delete(self, source: str) -> bool:
        await self.ensure_collection()
        if await self.get(source) is None:
            return False
        await self._run(
            self._client.delete,
            self.collection_name,
            points_selector=models.PointIdsList(points=[topic_point_id(source)]),
        )
        await self._wrote()
        return True

    async def delete_many(self, sources: Sequence[str]) -> int:
        """Delete these topics (unknown sources are ignored); the number that existed."""
        await self.ensure_collection()
        existing = await self._existing_payloads(list(dict.fromkeys(sources)))
        if existing:
            await self._run(
                self._client.delete,
                self.collection_name,
                points_selector=models.PointIdsList(points=[topic_point_id(s) for s in existing]),
            )
            await self._wrote()
        return len(existing)

    async def sources_with_label(self, label: str) -> list[str]:
        """Every topic source carrying ``label``, in storage order."""
        await self.ensure_collection()
        payload = models.PayloadSelectorInclude(include=["source"])
        return [record.payload["source"] async for record in self._scroll(label, payload) if record.payload]

    async def delete_label(self, label: str) -> int:
        """Delete every topic carrying ``label``; how many there were."""
        return await self.delete_many(await self.sources_with_label(label))

    async def _wrote(self) -> None:
        self._invalidate()
        if self.on_write is not None:
            await self.on_write(self.name)

    def _invalidate(self) -> None:
        # Called after a write lands: a snapshot built from before it carries an older version.
        self._version += 1
        self._snapshot = None

    # -- reads -----------------------------------------------------------------------------

    async def _pool_index(self) -> PoolIndex | None:
        """The local-mode snapshot of the pool (see ``pool_index``); None against a server."""
        if not self._local:
            return None
        snapshot = self._snapshot
        if snapshot is not None and snapshot[0] == self._version:
            return snapshot[1]
        version = self._version
        topics: list[Topic] = []
        sparse: list[models.SparseVector | None] = []
        dense: list[list[float] | None] = []
        async for record in self._scroll(RAG_CONTEXT_LABEL, True, vectors=True):
            vectors = record.vector if isinstance(record.vector, dict) else {}
            if not record.payload or SPARSE_VECTOR not in vectors:
                continue
            topics.append(_topic(record.payload))
            sparse.append(vectors[SPARSE_VECTOR])
            dense.append(vectors.get(DENSE_VECTOR))
        index = await asyncio.to_thread(PoolIndex, topics, sparse, dense)
        if version == self._version:
            self._snapshot = (version, index)
        return index

    async def get(self, source: str) -> Topic | None:
        found = await self.get_many([source])
        return found[0] if found else None

    async def get_many(self, sources: Sequence[str]) -> list[Topic]:
        """Topics whose source matches exactly, in the order asked; unknown sources are dropped."""
        await self.ensure_collection()
        if not sources:
            return []
        by_source = await self._existing_payloads(list(dict.fromkeys(sources)))
        return [_topic(by_source[s]) for s in dict.fromkeys(sources) if s in by_source]

    async def current(self, sources: Sequence[str]) -> list[Topic]:
        """Like ``get_many``, read from the local-mode snapshot when it holds them (no Qdrant call)."""
        index = await self._pool_index()
        if index is None:
            return await self.get_many(sources)
        found = {s: index.by_source[s] for s in sources if s in index.by_source}
        missing = [s for s in sources if s not in found]
        if missing:
            found.update({t.source: t for t in await self.get_many(missing)})
        return [found[s] for s in dict.fromkeys(sources) if s in found]

    async def list(self, limit: int = 50, offset: str | None = None, label: str | None = None) -> TopicPage:
        await self.ensure_collection()
        flt = _label_filter(label)
        records, next_offset = await self._run(
            self._client.scroll,
            self.collection_name,
            scroll_filter=flt,
            limit=limit,
            offset=offset,
            with_payload=True,
        )
        return TopicPage(
            topics=[_topic(r.payload) for r in records if r.payload],
            next_offset=str(next_offset) if next_offset is not None else None,
        )

    async def count(self, label: str | None = None) -> int:
        await self.ensure_collection()
        result = await self._run(self._client.count, self.collection_name, count_filter=_label_filter(label))
        return result.count

    async def pool_is_empty(self) -> bool:
        """No topic to retrieve from (a turn can skip embedding its query). Local mode reads its snapshot;
        against a server a count, remembered for ``POOL_COUNT_TTL_S`` or until this process writes."""
        await self.ensure_collection()
        index = await self._pool_index()
        if index is not None:
            return not index.topics
        now = time.monotonic()
        if self._pool_count is None or self._pool_count[0] != self._version or now - self._pool_count[1] > (
                POOL_COUNT_TTL_S):
            self._pool_count = (self._version, now, await self.count(label=RAG_CONTEXT_LABEL))
        return self._pool_count[2] == 0

    async def rag_pool(self, limit: int = 300) -> list[Topic]:
        """The ``rag_context`` topics, newest ``updated_at`` first, at most ``limit``."""
        await self.ensure_collection()
        index = await self._pool_index()
        topics: list[Topic] = list(index.topics) if index else []
        offset: str | None = None
        while index is None:
            page = await self.list(limit=256, offset=offset, label=RAG_CONTEXT_LABEL)
            topics.extend(page.topics)
            if page.next_offset is None:
                break
            offset = page.next_offset
        topics.sort(key=lambda t: (t.updated_at, t.source), reverse=True)
        return topics[:limit]

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]] | None:
        """Query vectors, or None when the knowledge base runs sparse-only."""
        await self.ensure_collection()
        if self._dense is None:
            return None
        return await self._dense.embed_queries(texts)

    async def dense_vectors(self, sources: Sequence[str]) -> dict[str, list[float]]:
        """The stored dense vectors of these topics (those that have one), for MMR."""
        await self.ensure_collection()
        if self._dense is None or not sources:
            return {}
        index = await self._pool_index()
        if index is not None:
            return index.dense_vectors(sources)
        records = await self._run(
            self._client.retrieve, self.collection_name, ids=[topic_point_id(s) for s in sources],
            with_payload=["source"], with_vectors=[DENSE_VECTOR],
        )
        out: dict[str, list[float]] = {}
        for record in records:
            vectors = record.vector if isinstance(record.vector, dict) else {}
            if record.payload and DENSE_VECTOR in vectors:
                out[record.payload["source"]] = list(vectors[DENSE_VECTOR])
        return out

    async def search_sparse(self, weighted_texts: Sequence[tuple[str, float]], k: int) -> list[ScoredTopic]:
        await self.ensure_collection()
        vector = self._sparse.encode_query(weighted_texts)
        if not vector.indices:
            return []
        index = await self._pool_index()
        if index is not None:
            return index.search_sparse(vector, k)
        return await self._query(vector, SPARSE_VECTOR, k)

    async def search_dense(self, vector: Sequence[float], k: int) -> list[ScoredTopic]:
        await self.ensure_collection()
        if self._dense is None:
            return []
        index = await self._pool_index()
        if index is not None:
            return index.search_dense(vector, k)
        return await self._query(list(vector), DENSE_VECTOR, k)

    async def _query(self, query: models.SparseVector | list[float], using: str, k: int) -> list[ScoredTopic]:
        response = await self._run(
            self._client.query_points,
            self.collection_name,
            query=query,
            using=using,
            limit=k,
            with_payload=True,
        )
        return [
            ScoredTopic(topic=_topic(point.payload), score=point.score) for point in response.points if point.payload
        ]


def _label_filter(label: str | None) -> models.Filter | None:
    if label is None:
        return None
    return models.Filter(must=[models.FieldCondition(key="labels", match=models.MatchValue(value=label))])


def _payload(topic: Topic, content_hash: str) -> dict[str, Any]:
    payload = topic.model_dump(mode="json")
    payload["content_hash"] = content_hash
    return payload


def _topic(payload: dict[str, Any]) -> Topic:
    return Topic.model_validate({k: v for k, v in payload.items() if k != "content_hash"})

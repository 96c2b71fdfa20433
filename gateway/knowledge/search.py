"""The knowledge base as the gateway uses it: one KnowledgeBase, its strategies, one search path.

The admin search endpoint, the CLI, evaluation and every turn's RAG context all go through
``Knowledge.search`` — there is no separate "test retrieval" code path.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from qdrant_client import QdrantClient
from redis.exceptions import RedisError

from gateway.core.errors import InvalidInput
from gateway.core.metrics import Metrics
from gateway.core.outbound import OutboundPolicy
from gateway.core.outbound_client import GuardedTransport
from gateway.core.settings import Settings
from gateway.knowledge.bases import KnowledgeBases
from gateway.knowledge.documents import Documents
from gateway.knowledge.embedding import dense_encoder
from gateway.knowledge.originals import Originals
from gateway.knowledge.semantic_cache import SemanticCache, topic_digest
from rag_core.chunking import ChunkingOptions
from rag_core.controlled import ControlledSearch, Reranker
from rag_core.controls import RetrievalControls
from rag_core.document_ingestion import DocumentIngestor, LockFactory
from rag_core.encoders import DenseEncoder
from rag_core.errors import SwitchboardError
from rag_core.extract import ZipLimits
from rag_core.extraction_sandbox import ExtractBudget, ExtractionSandbox
from rag_core.generation import StructuredGenerator
from rag_core.knowledge_base import MAIN_KB, KnowledgeBase, open_qdrant
from rag_core.query_shape import QueryShape
from rag_core.rerankers import build_reranker
from rag_core.retrieval import ChatTurn, RetrievalStrategy, SearchRequest, SearchResult, StrategyContext
from rag_core.strategies import LLM_STRATEGIES, STRATEGIES, build_strategies

log = logging.getLogger(__name__)
_RERANK_MAX_BYTES = 2 * 1024 * 1024  # scores for a few hundred documents take a few kilobytes

MAX_QUERY_CHARS = 4000


@dataclass(frozen=True)
class _CacheKey:
    scope: str
    vector: list[float]


@dataclass(frozen=True)
class _Lookup:
    hit: SearchResult | None = None
    key: _CacheKey | None = None  # a miss: store the result here
    off: str | None = None  # why the cache was not used


def _finished(result: SearchResult, t0: float, cache: str) -> SearchResult:
    timings = {**result.timings_ms, "total": round((time.perf_counter() - t0) * 1000, 3)}
    return result.model_copy(update={"timings_ms": timings, "cache": cache})


def extract_budget(settings: Settings) -> ExtractBudget:
    """The budget every document's extraction runs under (settings ``extract_*``, ``chunk_max_chars``)."""
    return ExtractBudget(
        timeout_s=settings.extract_timeout_s, max_memory_mb=settings.extract_max_memory_mb,
        max_chunk_chars=settings.chunk_max_chars,
        zip_limits=ZipLimits(int(settings.extract_max_unzipped_mb * 1024 * 1024), settings.extract_max_zip_ratio),
    )


def _reranker_transport(settings: Settings) -> GuardedTransport:
    """The reranker's way out: its configured host is the operator's own infrastructure (allowed, as the
    LLM base URL is), every other address is judged by the outbound policy, and its answer is capped."""
    policy = OutboundPolicy.parse(settings.outbound_allow_hosts).allowing(settings.reranker_base_url)
    return GuardedTransport(policy, max_bytes=_RERANK_MAX_BYTES, max_ratio=settings.outbound_max_compression_ratio)


class Knowledge:
    """Opened by ``open`` (the app's lifespan does it, with the embedding model's load), or on first use:
    building it takes no resource, so an app can be built without the local-mode Qdrant lock."""

    def __init__(
        self, settings: Settings, generator: StructuredGenerator | None, document_lock: LockFactory | None = None,
        *, cache: SemanticCache | None = None, metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.controls = settings.retrieval_controls()  # validated at start: a bad setting names itself
        self.cache = cache
        self.metrics = metrics
        self._controlled: dict[tuple[str, ...], ControlledSearch] = {}
        self._rerankers: dict[str, Reranker | None] = {}
        self._reranker_loads: dict[str, asyncio.Task[Reranker | None]] = {}
        self._shape = QueryShape()
        self.document_lock = document_lock  # one ingest of a document at a time across processes
        self.generator = generator
        self._client: QdrantClient | None = None
        self._bases: KnowledgeBases | None = None
        self._ingestor: DocumentIngestor | None = None
        self._documents: Documents | None = None
        self._strategies: dict[tuple[str, ...], dict[str, RetrievalStrategy]] = {}
        self.has_llm = generator is not None
        self.default_strategy = settings.retrieval_strategy or ("hybrid_llm" if self.has_llm else "hybrid")
        if self.default_strategy not in STRATEGIES:
            raise ValueError(
                f"SWITCHBOARD_RETRIEVAL_STRATEGY={self.default_strategy!r} is not one of {sorted(STRATEGIES)}"
            )

    def open(self) -> None:
        if self._bases is not None:
            return
        settings = self.settings
        dense = dense_encoder(settings)
        self._client = open_qdrant(settings.qdrant_url, settings.data_dir / "qdrant")
        chunking = ChunkingOptions(
            strategy=settings.chunking, chunk_tokens=settings.chunk_tokens, overlap_tokens=settings.chunk_overlap_tokens
        )
        retrieval = tuple(n.strip() for n in settings.retrieval_kbs.split(",") if n.strip())
        model = str(settings.embedding_model_path or settings.embedding_model)
        self._bases = KnowledgeBases(
            self._client, settings.agent_id, dense, chunking=chunking, embedding_model=model, retrieval=retrieval,
            on_write=self._written,
        )
        self._ingestor = DocumentIngestor(self._bases.documents, self._bases.catalog, lock=self.document_lock,
                                          sandbox=ExtractionSandbox(extract_budget(settings)))
        self._documents = Documents(self._bases, self._ingestor, Originals(settings.data_dir / "documents"))

    async def _written(self, kb: str) -> None:
        """A write to ``kb`` landed: the cache's entries for it must not be served any more."""
        if self.cache is None:
            return
        try:
            await self.cache.written(kb)
        except RedisError as exc:  # the write stands; say loudly that older answers may be served
            log.error("semantic cache: could not record a write to %r, older entries may be served: %s", kb, exc)

    @property
    def bases(self) -> KnowledgeBases:
        self.open()
        assert self._bases is not None
        return self._bases

    @property
    def dense(self) -> DenseEncoder | None:
        """The embedding model, once the knowledge base is open (None before, or when sparse only)."""
        return self._bases.dense if self._bases is not None else None

    @property
    def documents(self) -> Documents:
        self.open()
        assert self._documents is not None
        return self._documents

    @property
    def kb(self) -> KnowledgeBase:
        """The ``main`` knowledge base (the one the topic endpoints and commands use by default)."""
        return self.bases.main

    def _strategies_for(self, names: tuple[str, ...]) -> dict[str, RetrievalStrategy]:
        built = self._strategies.get(names)
        if built is None:
            group = self.bases.group(list(names))
            built = build_strategies(StrategyContext(knowledge_base=group, generator=self.generator))
            self._strategies[names] = built
        return built

    @property
    def client(self) -> QdrantClient:
        self.open()
        assert self._client is not None
        return self._client

    @property
    def strategies(self) -> dict[str, RetrievalStrategy]:
        return self._strategies_for((MAIN_KB,))

    def strategy_name(self, requested: str | None) -> str:
        name = requested or self.default_strategy
        if name not in self.strategies:
            raise InvalidInput(f"strategy: unknown retrieval strategy {name!r} (known: {sorted(self.strategies)})")
        if name in LLM_STRATEGIES and not self.has_llm:
            raise InvalidInput(f"strategy: {name!r} needs a language model and none is configured")
        return name

    def controls_for(self, overrides: dict[str, Any] | RetrievalControls | None) -> RetrievalControls:
        """The settings' controls with an agent's or a request's overrides; a bad value is InvalidInput
        naming the field."""
        if isinstance(overrides, RetrievalControls):
            return overrides
        try:
            return self.controls.merged(overrides)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "controls"
            raise InvalidInput(f"{field}: {first['msg']}") from None

    async def _reranker(self, kind: str) -> Reranker | None:
        """Built once per kind in a thread: a fastembed model loads for seconds (and offline, fastembed's
        download retries sleep for most of a minute), which must not stall the event loop. A search waits
        for the load at most the rerank timeout; until it is done, searches keep the fused order."""
        if kind in self._rerankers:
            return self._rerankers[kind]
        load = self._reranker_loads.get(kind)
        if load is None:
            load = self._reranker_loads[kind] = asyncio.create_task(asyncio.to_thread(self._build_reranker, kind))
        try:
            built = await asyncio.wait_for(asyncio.shield(load), self.settings.reranker_timeout_s)
        except TimeoutError:
            log.warning("reranker %s is still loading; this search keeps the fused order", kind)
            return None
        self._rerankers[kind] = built
        return built

    def _build_reranker(self, kind: str) -> Reranker | None:
        settings = self.settings
        key = settings.reranker_api_key.get_secret_value() if settings.reranker_api_key else None
        try:
            if kind == "http":
                if not settings.reranker_base_url:
                    raise ValueError("SWITCHBOARD_RERANKER_BASE_URL is not set")
                return build_reranker("http", base_url=settings.reranker_base_url, api_key=key,
                                      timeout_s=settings.reranker_timeout_s, transport=_reranker_transport(settings))
            return build_reranker(kind, model=settings.reranker_model,
                                  model_path=settings.reranker_model_path)  # type: ignore[arg-type]
        except (SwitchboardError, ValueError) as exc:
            log.warning("reranker %s is unavailable: %s", kind, exc)
            return None

    def _controlled_for(self, names: tuple[str, ...]) -> ControlledSearch:
        built = self._controlled.get(names)
        if built is None:
            built = ControlledSearch(
                self._strategies_for(names), self.bases.group(list(names)), generator=self.generator,
                rerankers=self._reranker, rerank_timeout_s=self.settings.reranker_timeout_s, shape=self._shape,
            )
            self._controlled[names] = built
        return built

    async def search(
        self,
        query: str,
        history: Sequence[ChatTurn] = (),
        *,
        strategy: str | None = None,
        k: int | None = None,
        conversation_meta: str = "",
        kbs: list[str] | None = None,
        controls: dict[str, Any] | RetrievalControls | None = None,
    ) -> SearchResult:
        """Search the knowledge bases ``kbs`` (default: the agent's, see ``KnowledgeBases.searched``) with
        the retrieval controls (the settings', with ``controls`` overriding them), through the semantic
        cache when it is on. ``result.cache`` says "hit", "miss" or "off"; ``timings_ms["total"]`` is the
        whole search, cache included."""
        t0 = time.perf_counter()
        name = self.strategy_name(strategy)
        effective = self.controls_for(controls)
        names = tuple(await self.bases.searched(kbs))
        request = SearchRequest(
            query=query, history=list(history), k=k or self.settings.rag_top_k, conversation_meta=conversation_meta
        )
        if await self.bases.group(list(names)).pool_is_empty():  # nothing to find: no embedding, no search
            empty = SearchResult(strategy=name, hits=[], notes=["the knowledge base has no topics: retrieval skipped"])
            return _finished(empty, t0, "off")
        lookup = await self._cache_lookup(name, names, request, effective) if effective.semantic_cache else None
        if lookup is not None and lookup.hit is not None:
            return _finished(lookup.hit, t0, "hit")
        result = await self._controlled_for(names).search(name, request, effective)
        if lookup is None:
            return _finished(result, t0, "off")
        if lookup.key is None:
            result = result.model_copy(update={"notes": [*result.notes, f"semantic cache off: {lookup.off}"]})
            return _finished(result, t0, "off")
        if not await self._cache_store(lookup.key, result, names):
            note = "semantic cache: not stored (over its size cap)"
            result = result.model_copy(update={"notes": [*result.notes, note]})
        return _finished(result, t0, "miss")

    # -- the semantic cache --------------------------------------------------------------------
    def _scope(self, name: str, names: tuple[str, ...], request: SearchRequest, controls: RetrievalControls) -> str:
        meta = request.conversation_meta if name in LLM_STRATEGIES else ""
        blob = json.dumps([name, sorted(names), request.k, controls.fingerprint(), meta])
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:24]

    async def _cache_lookup(
        self, name: str, names: tuple[str, ...], request: SearchRequest, controls: RetrievalControls
    ) -> _Lookup:
        """The cached result (a hit); or where to store this search's result (a miss); or why there is no cache."""
        if self.cache is None:
            return _Lookup(off="no cache backend")
        group = self.bases.group(list(names))
        vectors = await group.embed_queries(self._shape.dense_texts(request))
        if vectors is None:
            return _Lookup(off="the knowledge base has no dense encoder to key it")
        key = _CacheKey(self._scope(name, names, request, controls), self._shape.dense_vector(vectors))
        try:
            looked = await self.cache.lookup(key.scope, key.vector, controls.similarity_threshold, names)
            key, found = _CacheKey(looked.scope, key.vector), looked.found
            if found is None:
                self._cache_count("miss")
                return _Lookup(key=key)
            current = {t.source: topic_digest(t) for t in await group.current(list(found.digests))}
            if current == found.digests:
                self._cache_count("hit")
                note = f"semantic cache hit (cosine {found.similarity:.3f})"
                return _Lookup(hit=found.result.model_copy(update={"notes": [*found.result.notes, note]}))
            await self.cache.invalidate(found.entry_id)  # a topic it returned changed or is gone
            self._cache_count("stale")
            return _Lookup(key=key)
        except RedisError as exc:
            log.warning("semantic cache unavailable, searching without it: %s", exc)
            self._cache_count("error")
            return _Lookup(off=f"its Redis failed ({type(exc).__name__})")

    async def _cache_store(self, key: _CacheKey, result: SearchResult, names: tuple[str, ...]) -> bool:
        """Keep ``result``; False only when it is too large to be cached."""
        if self.cache is None or result.fell_back:  # a fallback (e.g. the search LLM failed) is not kept
            return True
        try:
            sources = list(dict.fromkeys(h.topic.source for h in result.hits))
            topics = await self.bases.group(list(names)).current(sources)
            return await self.cache.store(key.scope, key.vector, result, {t.source: topic_digest(t) for t in topics})
        except RedisError as exc:
            log.warning("semantic cache could not store a result: %s", exc)
            return True

    def _cache_count(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.semantic_cache.labels(outcome).inc()
        if self.cache is not None and outcome != "error":
            self.cache.count(outcome)

    def close(self) -> None:
        # Local mode holds a file lock on the data dir until closed.
        if self._client is not None:
            self._client.close()

"""The knowledge base as the gateway uses it: one KnowledgeBase, its strategies, one search path.

The admin search endpoint, the CLI, evaluation and every turn's RAG context all go through
``Knowledge.search`` — there is no separate "test retrieval" code path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from qdrant_client import QdrantClient

from gateway.core.errors import InvalidInput
from gateway.core.settings import Settings
from gateway.knowledge.bases import KnowledgeBases
from gateway.knowledge.documents import Documents
from gateway.knowledge.originals import Originals
from rag_core.chunking import ChunkingOptions
from rag_core.document_ingestion import DocumentIngestor, LockFactory
from rag_core.encoders import DenseEncoder, build_dense_encoder
from rag_core.generation import StructuredGenerator
from rag_core.knowledge_base import MAIN_KB, KnowledgeBase, open_qdrant
from rag_core.retrieval import ChatTurn, RetrievalStrategy, SearchRequest, SearchResult, StrategyContext
from rag_core.strategies import LLM_STRATEGIES, STRATEGIES, build_strategies

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 4000


def dense_encoder(settings: Settings) -> DenseEncoder | None:
    """The configured embedding model, or None (sparse-only) when it is off or cannot load."""
    return build_dense_encoder(
        settings.embeddings,
        model=settings.embedding_model if settings.embeddings == "fastembed" else None,
        model_path=settings.embedding_model_path,
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
    )


class Knowledge:
    """Opened by ``open`` (the app's lifespan does it, with the embedding model's load), or on first use:
    building it takes no resource, so an app can be built without the local-mode Qdrant lock."""

    def __init__(
        self, settings: Settings, generator: StructuredGenerator | None, document_lock: LockFactory | None = None
    ) -> None:
        self.settings = settings
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
            self._client, settings.agent_id, dense, chunking=chunking, embedding_model=model, retrieval=retrieval
        )
        self._ingestor = DocumentIngestor(self._bases.documents, self._bases.catalog, lock=self.document_lock)
        self._documents = Documents(self._bases, self._ingestor, Originals(settings.data_dir / "documents"))

    @property
    def bases(self) -> KnowledgeBases:
        self.open()
        assert self._bases is not None
        return self._bases

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

    async def search(
        self,
        query: str,
        history: Sequence[ChatTurn] = (),
        *,
        strategy: str | None = None,
        k: int | None = None,
        conversation_meta: str = "",
        kbs: list[str] | None = None,
    ) -> SearchResult:
        """Search the knowledge bases ``kbs`` (default: the agent's, see ``KnowledgeBases.searched``)."""
        name = self.strategy_name(strategy)
        names = tuple(await self.bases.searched(kbs))
        request = SearchRequest(
            query=query, history=list(history), k=k or self.settings.rag_top_k, conversation_meta=conversation_meta
        )
        t0 = time.perf_counter()
        result = await self._strategies_for(names)[name].search(request)
        log.debug("search %s took %.1f ms", name, (time.perf_counter() - t0) * 1000)
        return result

    def close(self) -> None:
        # Local mode holds a file lock on the data dir until closed.
        if self._client is not None:
            self._client.close()

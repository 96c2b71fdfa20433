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
from rag_core.encoders import DenseEncoder, build_dense_encoder
from rag_core.generation import StructuredGenerator
from rag_core.knowledge_base import KnowledgeBase, open_qdrant
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

    def __init__(self, settings: Settings, generator: StructuredGenerator | None) -> None:
        self.settings = settings
        self.generator = generator
        self._client: QdrantClient | None = None
        self._kb: KnowledgeBase | None = None
        self._strategies: dict[str, RetrievalStrategy] = {}
        self.has_llm = generator is not None
        self.default_strategy = settings.retrieval_strategy or ("hybrid_llm" if self.has_llm else "hybrid")
        if self.default_strategy not in STRATEGIES:
            raise ValueError(
                f"SWITCHBOARD_RETRIEVAL_STRATEGY={self.default_strategy!r} is not one of {sorted(STRATEGIES)}"
            )

    def open(self) -> None:
        if self._kb is not None:
            return
        dense = dense_encoder(self.settings)
        self._client = open_qdrant(self.settings.qdrant_url, self.settings.data_dir / "qdrant")
        self._kb = KnowledgeBase(self._client, self.settings.agent_id, dense=dense)
        self._strategies = build_strategies(StrategyContext(knowledge_base=self._kb, generator=self.generator))

    @property
    def kb(self) -> KnowledgeBase:
        self.open()
        assert self._kb is not None
        return self._kb

    @property
    def client(self) -> QdrantClient:
        self.open()
        assert self._client is not None
        return self._client

    @property
    def strategies(self) -> dict[str, RetrievalStrategy]:
        self.open()
        return self._strategies

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
    ) -> SearchResult:
        name = self.strategy_name(strategy)
        request = SearchRequest(
            query=query, history=list(history), k=k or self.settings.rag_top_k, conversation_meta=conversation_meta
        )
        t0 = time.perf_counter()
        result = await self.strategies[name].search(request)
        log.debug("search %s took %.1f ms", name, (time.perf_counter() - t0) * 1000)
        return result

    def close(self) -> None:
        # Local mode holds a file lock on the data dir until closed.
        if self._client is not None:
            self._client.close()

"""Dense embedding providers behind one protocol: fastembed (local ONNX), any OpenAI-compatible
``/embeddings`` endpoint, or none (sparse-only retrieval)."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

import openai

from rag_core.errors import EncoderUnavailable

log = logging.getLogger(__name__)

EmbeddingProvider = Literal["fastembed", "openai", "none"]
DEFAULT_FASTEMBED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
# Told each embeddings call's model and the prompt tokens its endpoint reported (a cost meter's hook).
UsageHook = Callable[[str, int], None]


@runtime_checkable
class DenseEncoder(Protocol):
    """A dense text embedder. Implementations must be safe to call from several coroutines,
    must not block the event loop, and raise ``EncoderUnavailable`` when they cannot answer.
    ``signature`` identifies the model so that a model change triggers re-embedding."""

    @property
    def signature(self) -> str: ...

    async def dimension(self) -> int: ...

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]: ...


class FastEmbedEncoder:
    def __init__(
        self,
        model_name: str = DEFAULT_FASTEMBED_MODEL,
        model_path: Path | None = None,
        threads: int | None = None,
        batch_size: int = 64,
        executor: Executor | None = None,
    ) -> None:
        from fastembed import TextEmbedding

        self._executor = executor  # where documents are embedded (None: asyncio's default threads)
        extra = {"specific_model_path": str(model_path)} if model_path else {}
        self._model = TextEmbedding(model_name, threads=threads, **extra)
        self._model_name = model_name
        self._batch_size = batch_size
        self._dimension = len(next(iter(self._model.embed(["dimension probe"]))))

    @property
    def signature(self) -> str:
        return f"fastembed:{self._model_name}:{self._dimension}"

    def model_file(self) -> tuple[Path, str]:
        """The folder the ONNX model was loaded from and the model file's path in it."""
        inner = self._model.model
        return Path(inner._model_dir), inner.model_description.model_file

    async def dimension(self) -> int:
        return self._dimension

    def embed_documents_sync(self, texts: Sequence[str]) -> list[list[float]]:
        # Batches pad to their longest text: embedding in length order wastes far less work.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors = self._model.embed([texts[i] for i in order], batch_size=self._batch_size)
        result: list[list[float]] = [[] for _ in texts]
        for i, vector in zip(order, vectors, strict=True):
            result[i] = vector.tolist()
        return result

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self._executor is not None:
            return await asyncio.get_running_loop().run_in_executor(self._executor, self.embed_documents_sync, texts)
        return await asyncio.to_thread(self.embed_documents_sync, texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        # MiniLM is symmetric: queries and documents share one embedding space and no prefix.
        return await asyncio.to_thread(self.embed_documents_sync, texts)


class OpenAIEncoder:
    def __init__(
        self,
        model: str = DEFAULT_OPENAI_MODEL,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimension: int | None = None,
        client: openai.AsyncOpenAI | None = None,
        on_usage: UsageHook | None = None,
    ) -> None:
        self._client = client or openai.AsyncOpenAI(base_url=base_url, api_key=api_key)
        self._model = model
        self._dimension = dimension
        self._on_usage = on_usage

    @property
    def signature(self) -> str:
        return f"openai:{self._model}"

    async def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = len((await self.embed_queries(["dimension probe"]))[0])
        return self._dimension

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        try:
            response = await self._client.embeddings.create(model=self._model, input=list(texts))
        except openai.OpenAIError as exc:
            raise EncoderUnavailable(f"embedding endpoint failed: {exc}") from exc
        usage = getattr(response, "usage", None)
        if self._on_usage is not None and usage is not None and usage.prompt_tokens:
            self._on_usage(self._model, usage.prompt_tokens)
        ordered = sorted(response.data, key=lambda item: item.index)
        return [list(item.embedding) for item in ordered]

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.embed_documents(texts)


class QueryWrapper:
    """A dense encoder that changes how queries are embedded and hands everything else to ``inner``."""

    def __init__(self, inner: DenseEncoder) -> None:
        self.inner = inner

    @property
    def signature(self) -> str:
        return self.inner.signature

    async def dimension(self) -> int:
        return await self.inner.dimension()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.inner.embed_documents(texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.inner.embed_queries(texts)


class SplitEncoder(QueryWrapper):
    """Documents embedded by one encoder, queries by another of the same space (an int8 copy of the same
    model): the stored vectors, and so the signature, stay the documents' encoder's."""

    def __init__(self, documents: DenseEncoder, queries: DenseEncoder) -> None:
        super().__init__(documents)
        self.documents = documents
        self.queries = queries

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.queries.embed_queries(texts)


class QueryVectorCache(QueryWrapper):
    """A dense encoder whose query vectors are remembered by exact text (least recently used out past
    ``size``): a conversation's history window and a repeated question are embedded once per process."""

    def __init__(self, inner: DenseEncoder, size: int = 4096) -> None:
        super().__init__(inner)
        self._size = size
        self._vectors: OrderedDict[str, list[float]] = OrderedDict()

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            for text, vector in zip(missing, await self.inner.embed_queries(missing), strict=True):
                self._vectors[text] = vector
        out = []
        for text in texts:
            self._vectors.move_to_end(text)
            out.append(self._vectors[text])
        while len(self._vectors) > self._size:
            self._vectors.popitem(last=False)
        return out


def build_dense_encoder(
    provider: EmbeddingProvider,
    *,
    model: str | None = None,
    model_path: Path | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    dimension: int | None = None,
    threads: int | None = None,
    executor: Executor | None = None,
    on_usage: UsageHook | None = None,
) -> DenseEncoder | None:
    """The configured dense encoder, or None for sparse-only retrieval. A model that cannot be
    loaded is logged once and degrades to sparse-only instead of failing startup. ``on_usage``: told the
    tokens an OpenAI-compatible endpoint reports (fastembed runs locally and reports none)."""
    if provider == "none":
        return None
    if provider == "openai":
        return OpenAIEncoder(model or DEFAULT_OPENAI_MODEL, base_url=base_url, api_key=api_key, dimension=dimension,
                             on_usage=on_usage)
    if provider == "fastembed":
        name = model or DEFAULT_FASTEMBED_MODEL
        try:
            return FastEmbedEncoder(name, model_path=model_path, threads=threads, executor=executor)
        except Exception as exc:  # noqa: BLE001 - any load failure means "run sparse-only"
            log.warning("dense model %s could not load (%s); running sparse-only", name, exc)
            return None
    raise ValueError(f"unknown embedding provider {provider!r}")

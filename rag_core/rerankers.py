"""Rerankers: score (query, document) pairs with a cross-encoder and keep the best. Two backends behind
one protocol: a local ONNX cross-encoder through fastembed, or any server speaking the common
``/rerank`` protocol (Cohere, Jina, text-embeddings-inference, vLLM, Infinity)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rag_core.errors import RerankerUnavailable

__all__ = [
    "DEFAULT_FASTEMBED_RERANKER",
    "FastembedReranker",
    "HttpReranker",
    "RerankScore",
    "Reranker",
    "RerankerKind",
    "build_reranker",
    "sigmoid",
]

RerankerKind = Literal["none", "fastembed", "http"]
DEFAULT_FASTEMBED_RERANKER = "Xenova/ms-marco-MiniLM-L-6-v2"
_BODY_EXCERPT_CHARS = 200


class RerankScore(BaseModel):
    """One reranked document: its position in the ``documents`` list given, and its relevance (0-1)."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(ge=0)
    score: float = Field(ge=0.0, le=1.0)


@runtime_checkable
class Reranker(Protocol):
    """Scores documents against a query. ``rerank`` answers at most ``top_n`` scores, best first, each
    a probability-like relevance in 0-1 whose ``index`` points into ``documents``. It never blocks the
    event loop and raises ``RerankerUnavailable`` when it cannot answer, so that the caller can fall
    back to the order it already had. ``name`` says which backend and model answered, for traces."""

    name: str

    async def rerank(self, query: str, documents: list[str], top_n: int) -> list[RerankScore]: ...


def sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)  # the other branch would overflow for very negative logits
    return z / (1.0 + z)


def _best_first(scores: Sequence[float], top_n: int) -> list[RerankScore]:
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return [RerankScore(index=i, score=scores[i]) for i in order[:top_n]]


def _check_top_n(top_n: int) -> None:
    if top_n < 1:
        raise ValueError(f"top_n must be at least 1, got {top_n}")


class _WireResult(BaseModel):
    # extra="ignore": Cohere, Jina and Infinity may echo the document ({"document": {"text": ...}}).
    model_config = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)

    index: int
    relevance_score: float


class _WireResponse(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    results: list[_WireResult]


class HttpReranker:
    """A client of ``POST {base_url}/rerank``. ``timeout_s`` bounds the whole call, not each read.
    ``transport`` is where its requests go out: the gateway hands in its guarded transport (outbound
    policy on every request, body size cap); redirects are not followed."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        model: str | None = None,
        timeout_s: float = 5.0,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = f"http:{model}" if model else "http"
        self._url = base_url.rstrip("/") + "/rerank"
        self._api_key = api_key or None
        self._model = model
        self._timeout_s = timeout_s
        self._owns_client = client is None
        # a proxy from the environment would be a way around the transport
        self._client = client or httpx.AsyncClient(timeout=timeout_s, transport=transport, trust_env=transport is None)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def rerank(self, query: str, documents: list[str], top_n: int) -> list[RerankScore]:
        _check_top_n(top_n)
        if not documents:
            return []
        # Several servers reject a top_n larger than the document list.
        payload: dict[str, Any] = {"query": query, "documents": documents, "top_n": min(top_n, len(documents))}
        if self._model:
            payload["model"] = self._model
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            async with asyncio.timeout(self._timeout_s):
                response = await self._client.post(self._url, json=payload, headers=headers,
                                                   timeout=self._timeout_s)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise self._unavailable(f"timed out after {self._timeout_s:g} s") from exc
        except httpx.HTTPError as exc:
            raise self._unavailable(f"could not be reached ({type(exc).__name__}: {exc})") from exc
        if not response.is_success:
            excerpt = response.text[:_BODY_EXCERPT_CHARS]
            raise self._unavailable(f"answered HTTP {response.status_code}: {excerpt!r}")
        return self._parse(response.content, len(documents), top_n)

    def _parse(self, body: bytes, count: int, top_n: int) -> list[RerankScore]:
        try:
            results = _WireResponse.model_validate_json(body).results
        except ValidationError as exc:
            problem = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(part) for part in problem["loc"]) or "body"
            raise self._unavailable(f"answered a malformed body ({where}: {problem['msg']})") from exc
        seen: set[int] = set()
        for result in results:
            if not 0 <= result.index < count:
                raise self._unavailable(f"answered index {result.index} for {count} documents")
            if result.index in seen:
                raise self._unavailable(f"answered index {result.index} twice")
            seen.add(result.index)
        raw = [result.relevance_score for result in results]
        # A score outside 0-1 means the server sends logits (TEI and vLLM without activation do):
        # the whole answer is then logits, so every score goes through the sigmoid to keep the order.
        if any(not 0.0 <= score <= 1.0 for score in raw):
            raw = [sigmoid(score) for score in raw]
        ranked = sorted(zip(results, raw, strict=True), key=lambda pair: (-pair[1], pair[0].index))
        return [RerankScore(index=result.index, score=score) for result, score in ranked[:top_n]]

    def _unavailable(self, cause: str) -> RerankerUnavailable:
        message = f"reranker at {self._url} {cause}"
        if self._api_key:  # a server may echo the key it refused; it never goes into a log or a trace
            message = message.replace(self._api_key, "***")
        return RerankerUnavailable(message)


class FastembedReranker:
    """A local ONNX cross-encoder. ``model`` names one of fastembed's rerankers (downloaded into its
    cache on first use); ``model_path`` is a folder holding ``model.onnx`` (or ``onnx/model.onnx``)
    and its tokenizer files, loaded without any download. The model's logits go through a sigmoid."""

    def __init__(
        self,
        model: str | None = None,
        model_path: Path | None = None,
        *,
        threads: int | None = None,
        batch_size: int = 32,
    ) -> None:
        try:
            from fastembed.rerank.cross_encoder import TextCrossEncoder
        except ImportError as exc:
            raise RerankerUnavailable(f"fastembed's cross-encoder API is not installed ({exc})") from exc
        self._batch_size = batch_size
        if model_path is None:
            label = model or DEFAULT_FASTEMBED_RERANKER
            try:
                self._encoder = TextCrossEncoder(label, threads=threads)
            except Exception as exc:  # noqa: BLE001 - fastembed raises anything from ValueError to OSError
                raise RerankerUnavailable(f"reranker model {label} could not load: {exc}") from exc
        else:
            path = Path(model_path)
            label = model or path.name
            self._encoder = _load_local(TextCrossEncoder, path, label, threads)
        self.name = f"fastembed:{label}"
        try:
            self._scores("probe", ["probe"])
        except Exception as exc:  # noqa: BLE001 - e.g. a bi-encoder folder answers vectors, not one logit
            raise RerankerUnavailable(f"{self.name} is not a working cross-encoder: {exc}") from exc

    def _scores(self, query: str, documents: list[str]) -> list[float]:
        logits = self._encoder.rerank(query, documents, batch_size=self._batch_size)
        return [sigmoid(float(logit)) for logit in logits]

    async def rerank(self, query: str, documents: list[str], top_n: int) -> list[RerankScore]:
        _check_top_n(top_n)
        if not documents:
            return []
        try:
            scores = await asyncio.to_thread(self._scores, query, documents)
        except Exception as exc:  # noqa: BLE001 - onnxruntime errors have no common base
            raise RerankerUnavailable(f"{self.name} failed: {exc}") from exc
        return _best_first(scores, top_n)


def _load_local(encoder_class: Any, path: Path, label: str, threads: int | None) -> Any:
    if not path.is_dir():
        raise RerankerUnavailable(f"reranker model folder {path} does not exist")
    model_file = next((name for name in ("model.onnx", "onnx/model.onnx") if (path / name).is_file()), None)
    if model_file is None:
        raise RerankerUnavailable(f"reranker model folder {path} holds no model.onnx or onnx/model.onnx")
    # fastembed only loads registered names; one registration per model file, whatever label it has.
    name = f"local:{path.resolve() / model_file}"
    if not any(known["model"].lower() == name.lower() for known in encoder_class.list_supported_models()):
        from fastembed.common.model_description import ModelSource

        encoder_class.add_custom_model(name, ModelSource(url=path.resolve().as_uri()), model_file=model_file,
                                       description=f"local cross-encoder {label}")
    try:
        return encoder_class(name, threads=threads, specific_model_path=str(path), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - a broken folder fails in onnxruntime or tokenizers
        raise RerankerUnavailable(f"reranker model in {path} could not load: {exc}") from exc


def build_reranker(kind: RerankerKind, **config: Any) -> Reranker | None:
    """The configured reranker, or None for ``none``. ``config`` holds the backend's constructor
    arguments. A fastembed model that cannot load raises ``RerankerUnavailable``: the caller decides
    whether to start without reranking (and say so) or to refuse to start."""
    if kind == "none":
        return None
    if kind == "http":
        return HttpReranker(**config)
    if kind == "fastembed":
        return FastembedReranker(**config)
    raise ValueError(f"unknown reranker {kind!r}")

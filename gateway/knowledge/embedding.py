"""The embedding model as the gateway runs it: the configured encoder, with (each a setting) an int8 copy for
query embeddings, explicit onnxruntime threads, concurrent queries embedded together, and a per-process
cache of query vectors by exact text."""

from __future__ import annotations

import logging
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from gateway.core.settings import Settings
from gateway.turn.llm import record_embedding
from rag_core.encoders import DenseEncoder, FastEmbedEncoder, QueryVectorCache, SplitEncoder, build_dense_encoder
from rag_core.quantize import int8_copy
from rag_core.query_batching import BatchingQueries

log = logging.getLogger(__name__)
DOCUMENTS_NICE = 10
_DOCUMENTS: ThreadPoolExecutor | None = None
_DOCUMENTS_GUARD = threading.Lock()


def _lower_priority() -> None:
    if sys.platform == "linux":  # per thread on Linux (elsewhere it would be the whole process)
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), DOCUMENTS_NICE)


def _documents_executor() -> ThreadPoolExecutor:
    """One low-priority thread for embedding documents: a large ingest gets the CPU turns leave."""
    global _DOCUMENTS
    with _DOCUMENTS_GUARD:
        if _DOCUMENTS is None:
            _DOCUMENTS = ThreadPoolExecutor(1, thread_name_prefix="embed-documents", initializer=_lower_priority)
        return _DOCUMENTS


def dense_encoder(settings: Settings) -> DenseEncoder | None:
    """The configured embedding model, or None (sparse-only) when it is off or cannot load. When queries
    have a model of their own, the documents' model is built and run in a low-priority thread, so its
    onnxruntime threads (created with it) inherit that priority and chat turns keep theirs."""
    build = partial(
        build_dense_encoder,
        settings.embeddings,
        model=settings.embedding_model if settings.embeddings == "fastembed" else None,
        model_path=settings.embedding_model_path,
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
        threads=settings.embedding_threads,
        on_usage=record_embedding,  # counted with the turn (or job) that embeds: insight's cost
    )
    split = settings.embedding_quantize == "int8" or settings.query_embedding_threads != settings.embedding_threads
    if settings.embeddings == "fastembed" and split:
        executor = _documents_executor()
        encoder = executor.submit(build, executor=executor).result()
    else:
        encoder = build()
    if encoder is None:
        return None
    if isinstance(encoder, FastEmbedEncoder):
        encoder = _with_query_model(encoder, settings)
    if settings.query_batching:
        encoder = BatchingQueries(encoder)
    if settings.query_embedding_cache:
        encoder = QueryVectorCache(encoder, size=settings.query_embedding_cache)
    return encoder


def _with_query_model(encoder: FastEmbedEncoder, settings: Settings) -> DenseEncoder:
    """Queries through an int8 copy (SWITCHBOARD_EMBEDDING_QUANTIZE=int8) and/or their own thread count
    (SWITCHBOARD_QUERY_EMBEDDING_THREADS); documents stay with the fp32 model and its vectors."""
    quantize = settings.embedding_quantize == "int8"
    if not quantize and settings.query_embedding_threads == settings.embedding_threads:
        return encoder
    model_dir, model_file = encoder.model_file()
    try:
        cache = settings.model_cache_dir or settings.data_dir / "models"
        folder = int8_copy(model_dir, model_file, cache) if quantize else model_dir
        queries = FastEmbedEncoder(settings.embedding_model, model_path=folder,
                                   threads=settings.query_embedding_threads)
    except Exception as exc:  # noqa: BLE001 - any failure: queries go through the fp32 model
        log.warning("the query embedding model could not be prepared (%s); using the fp32 model", exc)
        return encoder
    return SplitEncoder(encoder, queries)

"""The embedding model as the gateway assembles it from settings."""

from __future__ import annotations

from gateway.knowledge.embedding import dense_encoder
from rag_core.encoders import FastEmbedEncoder, QueryVectorCache, SplitEncoder
from rag_core.query_batching import BatchingQueries
from tests.rag_core.conftest import MODEL_PATH


async def test_defaults_queries_through_an_int8_copy_batched_and_cached(settings):
    encoder = dense_encoder(settings.model_copy(update={"embeddings": "fastembed", "embedding_model_path": MODEL_PATH}))
    assert isinstance(encoder, QueryVectorCache) and isinstance(encoder.inner, BatchingQueries)
    split = encoder.inner.inner
    assert isinstance(split, SplitEncoder) and isinstance(split.documents, FastEmbedEncoder)
    assert "-int8-" in str(split.queries.model_file()[0]) and split.signature == split.documents.signature
    first = await encoder.embed_queries(["how much is an e-bike"])
    assert await encoder.embed_queries(["how much is an e-bike"]) == first and encoder.inner.calls == 1  # remembered


async def test_each_part_can_be_turned_off(settings):
    encoder = dense_encoder(settings.model_copy(update={
        "embeddings": "fastembed", "embedding_model_path": MODEL_PATH, "embedding_quantize": "none",
        "query_embedding_threads": None, "query_batching": False, "query_embedding_cache": 0}))
    assert isinstance(encoder, FastEmbedEncoder)
    assert dense_encoder(settings) is None  # embeddings "none": sparse only

"""Switchboard's bottom layer: knowledge-base topics on Qdrant, encoders, retrieval
strategies, RAG context text, ingestion and evaluation. Never imports gateway or channels.

Names are imported on first use, so ``import rag_core.errors`` (which every error class of the
gateway does) does not load Qdrant's client and the encoders."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "Candidate": "rag_core.retrieval",
    "ChatTurn": "rag_core.retrieval",
    "DEFAULT_STRATEGY": "rag_core.strategies",
    "DenseEncoder": "rag_core.encoders",
    "EmbeddingProvider": "rag_core.encoders",
    "EncoderUnavailable": "rag_core.errors",
    "FastEmbedEncoder": "rag_core.encoders",
    "Hit": "rag_core.retrieval",
    "ImportLineError": "rag_core.errors",
    "ImportProblem": "rag_core.ingestion",
    "ImportReport": "rag_core.ingestion",
    "KnowledgeBase": "rag_core.knowledge_base",
    "KnowledgeBaseUnavailable": "rag_core.errors",
    "LLM_STRATEGIES": "rag_core.strategies",
    "OpenAIEncoder": "rag_core.encoders",
    "RAG_CONTEXT_LABEL": "rag_core.topic",
    "RAG_PLACEHOLDER": "rag_core.rag_context",
    "RagError": "rag_core.errors",
    "RetrievalStrategy": "rag_core.retrieval",
    "STRATEGIES": "rag_core.strategies",
    "ScoredTopic": "rag_core.knowledge_base",
    "SearchRequest": "rag_core.retrieval",
    "SearchResult": "rag_core.retrieval",
    "SparseEncoder": "rag_core.sparse",
    "StrategyContext": "rag_core.retrieval",
    "StructuredGenerator": "rag_core.generation",
    "StructuredOutputError": "rag_core.errors",
    "SwitchboardError": "rag_core.errors",
    "Topic": "rag_core.topic",
    "TopicPage": "rag_core.knowledge_base",
    "TopicValidationError": "rag_core.errors",
    "UnknownStrategy": "rag_core.errors",
    "UpsertReport": "rag_core.knowledge_base",
    "build_dense_encoder": "rag_core.encoders",
    "build_strategies": "rag_core.strategies",
    "build_strategy": "rag_core.strategies",
    "estimate_tokens": "rag_core.tokens",
    "format_rag": "rag_core.rag_context",
    "import_file": "rag_core.ingestion",
    "import_topics": "rag_core.ingestion",
    "open_qdrant": "rag_core.knowledge_base",
    "parse_topic": "rag_core.topic",
    "replace_rag_placeholder": "rag_core.rag_context",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'rag_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

__all__ = [
    "DEFAULT_STRATEGY",
    "LLM_STRATEGIES",
    "RAG_CONTEXT_LABEL",
    "RAG_PLACEHOLDER",
    "STRATEGIES",
    "Candidate",
    "ChatTurn",
    "DenseEncoder",
    "EmbeddingProvider",
    "EncoderUnavailable",
    "FastEmbedEncoder",
    "Hit",
    "ImportLineError",
    "ImportProblem",
    "ImportReport",
    "KnowledgeBase",
    "KnowledgeBaseUnavailable",
    "OpenAIEncoder",
    "RagError",
    "RetrievalStrategy",
    "ScoredTopic",
    "SearchRequest",
    "SearchResult",
    "SparseEncoder",
    "StrategyContext",
    "StructuredGenerator",
    "StructuredOutputError",
    "SwitchboardError",
    "Topic",
    "TopicPage",
    "TopicValidationError",
    "UnknownStrategy",
    "UpsertReport",
    "build_dense_encoder",
    "build_strategies",
    "build_strategy",
    "estimate_tokens",
    "format_rag",
    "import_file",
    "import_topics",
    "open_qdrant",
    "parse_topic",
    "replace_rag_placeholder",
]

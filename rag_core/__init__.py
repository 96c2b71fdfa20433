"""Switchboard's bottom layer: knowledge-base topics on Qdrant, encoders, retrieval
strategies, RAG context text, ingestion and evaluation. Never imports gateway or channels."""

from rag_core.encoders import (
    DenseEncoder,
    EmbeddingProvider,
    FastEmbedEncoder,
    OpenAIEncoder,
    build_dense_encoder,
)
from rag_core.errors import (
    EncoderUnavailable,
    ImportLineError,
    KnowledgeBaseUnavailable,
    RagError,
    StructuredOutputError,
    SwitchboardError,
    TopicValidationError,
    UnknownStrategy,
)
from rag_core.generation import StructuredGenerator
from rag_core.ingestion import ImportProblem, ImportReport, import_file, import_topics
from rag_core.knowledge_base import KnowledgeBase, ScoredTopic, TopicPage, UpsertReport, open_qdrant
from rag_core.rag_context import RAG_PLACEHOLDER, format_rag, replace_rag_placeholder
from rag_core.retrieval import (
    Candidate,
    ChatTurn,
    Hit,
    RetrievalStrategy,
    SearchRequest,
    SearchResult,
    StrategyContext,
)
from rag_core.sparse import SparseEncoder
from rag_core.strategies import (
    DEFAULT_STRATEGY,
    LLM_STRATEGIES,
    STRATEGIES,
    build_strategies,
    build_strategy,
)
from rag_core.tokens import estimate_tokens
from rag_core.topic import RAG_CONTEXT_LABEL, Topic, parse_topic

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

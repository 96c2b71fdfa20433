"""The knowledge base as turns use it: one search path, RAG context preparation, the demo."""

"""The project's error tree. ``SwitchboardError`` is the root every package subclasses."""

from __future__ import annotations


class SwitchboardError(Exception):
    """Root of every error Switchboard raises on purpose."""


class RagError(SwitchboardError):
    """Anything the knowledge base or retrieval layer refuses or cannot do."""


class TopicValidationError(RagError):
    """A topic failed validation; ``field`` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class KnowledgeBaseUnavailable(RagError):
    """Qdrant could not be reached or answered with an error."""


class EncoderUnavailable(RagError):
    """An embedding provider failed to load or to answer."""


class RerankerUnavailable(RagError):
    """A reranker failed to load, timed out, or answered with an error or a malformed body."""


class StructuredOutputError(RagError):
    """A structured-generation call returned output that does not match its schema."""


class UnknownStrategy(RagError):
    """A retrieval strategy name that is not in the registry."""


class ImportLineError(RagError):
    """One line (or Markdown section) of an import file is unusable."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


class UnsupportedFormat(RagError):
    """A file type no extractor reads; ``supported`` lists the formats that are read."""

    def __init__(self, message: str, supported: list[str]) -> None:
        super().__init__(message)
        self.supported = supported


class ExtractionFailed(RagError):
    """A file of a supported type whose text cannot be read; ``reason`` says why, for the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

"""The LLM capability rag_core needs, defined here and implemented by the gateway."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class StructuredGenerator(Protocol):
    """Runs one prompt constrained to a JSON schema and returns the parsed object.

    Implementations validate the output against ``schema`` and retry once themselves; on a
    final invalid answer they raise ``rag_core.errors.StructuredOutputError`` (or a subclass).
    Callers still re-check the returned dict, since a provider may ignore the schema."""

    async def structured_generation(self, prompt: str, schema: dict[str, Any]) -> dict[str, Any]: ...

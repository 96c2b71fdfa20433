"""Calls into qdrant-client from async code: off the event loop, one at a time in local mode
(qdrant-client's local mode is plain Python state), errors translated to ``KnowledgeBaseUnavailable``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from qdrant_client import QdrantClient
from qdrant_client.common.client_exceptions import QdrantException
from qdrant_client.http.exceptions import ApiException

from rag_core.errors import KnowledgeBaseUnavailable

_T = TypeVar("_T")
_LOCAL_LOCKS: dict[int, threading.Lock] = {}
_LOCAL_LOCKS_GUARD = threading.Lock()


def is_local(client: QdrantClient) -> bool:
    options = client.init_options
    return options.get("location") == ":memory:" or options.get("path") is not None


def local_lock(client: QdrantClient) -> threading.Lock | None:
    """The one lock every user of a local-mode client shares; None against a server."""
    if not is_local(client):
        return None
    with _LOCAL_LOCKS_GUARD:
        return _LOCAL_LOCKS.setdefault(id(client), threading.Lock())


class QdrantCalls:
    def __init__(self, client: QdrantClient) -> None:
        self.local = is_local(client)
        self._lock = local_lock(client)

    def call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        try:
            if self._lock is None:
                return fn(*args, **kwargs)
            with self._lock:
                return fn(*args, **kwargs)
        except (ApiException, QdrantException, OSError, RuntimeError) as exc:
            raise KnowledgeBaseUnavailable(f"qdrant: {exc}") from exc

    async def run(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        return await asyncio.to_thread(self.call, fn, *args, **kwargs)

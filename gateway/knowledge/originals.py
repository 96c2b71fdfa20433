"""The bytes each document was last ingested from, kept under the data dir so a document can be
re-ingested (new chunking, a new embedding model) without uploading or fetching it again.
With several gateway replicas, put the data dir on a shared volume or re-upload to re-ingest."""

from __future__ import annotations

import asyncio
from pathlib import Path


class Originals:
    def __init__(self, root: Path) -> None:
        self._root = root

    def _path(self, doc_id: str) -> Path:
        return self._root / doc_id[:2] / doc_id

    async def save(self, doc_id: str, data: bytes) -> None:
        path = self._path(doc_id)

        def write() -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial")
            partial.write_bytes(data)
            partial.replace(path)  # a reader never sees half a file

        await asyncio.to_thread(write)

    async def load(self, doc_id: str) -> bytes | None:
        path = self._path(doc_id)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            return None

    async def delete(self, doc_id: str) -> None:
        await asyncio.to_thread(self._path(doc_id).unlink, missing_ok=True)

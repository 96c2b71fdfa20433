"""Per-stage wall-clock timings for search results and turn traces."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class StageTimer:
    def __init__(self) -> None:
        self._started = time.perf_counter()
        self.stages_ms: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = (time.perf_counter() - start) * 1000.0
            self.stages_ms[name] = round(self.stages_ms.get(name, 0.0) + elapsed, 3)

    def finish(self) -> dict[str, float]:
        total = (time.perf_counter() - self._started) * 1000.0
        return {**self.stages_ms, "total": round(total, 3)}

"""What every fake vendor API shares: a log of the calls it received and scripted failures."""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Call:
    method: str
    params: dict
    at: float
    status: int


@dataclass(frozen=True)
class Failure:
    status: int
    retry_after: int | None = None
    description: str | None = None  # the vendor's error text, where the client reads it


@dataclass
class Recorder:
    calls: list[Call] = field(default_factory=list)
    _script: dict[str, deque[Failure]] = field(default_factory=lambda: defaultdict(deque))
    _always: dict[str, Failure] = field(default_factory=dict)
    _outage: dict[str, Failure] = field(default_factory=dict)  # method -> how it fails until it is back
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, method: str, status: int, *, times: int = 1, retry_after: int | None = None,
             description: str | None = None) -> None:
        with self._lock:
            self._script[method].extend(Failure(status, retry_after, description) for _ in range(times))

    def fail_always(self, method: str, status: int) -> None:
        self._always[method] = Failure(status)

    def outage(self, method: str, status: int, *, description: str | None = None) -> None:
        """An outage: every call fails until ``back(method)``. The test ends it once it has seen what the
        outage does, not after a fixed time that a slow turn on a loaded machine could outlast."""
        with self._lock:
            self._outage[method] = Failure(status, None, description)

    def back(self, method: str) -> None:
        """The outage of ``method`` is over."""
        with self._lock:
            self._outage.pop(method, None)

    def next_failure(self, method: str) -> Failure | None:
        with self._lock:
            if self._script[method]:
                return self._script[method].popleft()
            if (failure := self._outage.get(method)) is not None:
                return failure
        return self._always.get(method)

    def record(self, method: str, params: dict, status: int) -> None:
        self.calls.append(Call(method, params, time.monotonic(), status))

    def received(self, method: str, *, ok_only: bool = True) -> list[Call]:
        return [c for c in list(self.calls) if c.method == method and (not ok_only or c.status < 300)]

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self._script.clear()
            self._always.clear()
            self._outage.clear()

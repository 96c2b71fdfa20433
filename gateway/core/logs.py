"""Structured logging: key=value (or JSON) lines carrying conversation and turn ids when known."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from contextvars import ContextVar

turn_context: ContextVar[dict[str, str] | None] = ContextVar("turn_context", default=None)


class _ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.ctx = turn_context.get() or {}
        return True


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data = {
            "ts": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            **getattr(record, "ctx", {}),
        }
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data)


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ctx = getattr(record, "ctx", {})
        return line + "".join(f" {k}={v}" for k, v in ctx.items())


class _Redacting(logging.Formatter):
    """The last line of defence: a configured secret that reaches a log line anyway (a provider's
    error echoing a key, say) is masked in the line as written."""

    def __init__(self, inner: logging.Formatter, secrets: Iterable[str]) -> None:
        super().__init__()
        self.inner = inner
        self.secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)  # longest first

    def format(self, record: logging.LogRecord) -> str:
        line = self.inner.format(record)
        for secret in self.secrets:
            line = line.replace(secret, "[redacted]")
        return line


def configure_logging(level: str = "INFO", as_json: bool = False, secrets: Iterable[str] = ()) -> None:
    handler = logging.StreamHandler()
    handler.addFilter(_ContextFilter())
    inner = _JsonFormatter() if as_json else _TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handler.setFormatter(_Redacting(inner, secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    quiet_libraries(root.level)


def quiet_libraries(level: int) -> None:
    """Client libraries log every request with its full URL (keys in query strings included) at INFO
    and their wire traffic at DEBUG: they log warnings and worse only."""
    for noisy in ("httpx", "httpcore", "rq.worker", "rq.scheduler", "aiogram"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, level))

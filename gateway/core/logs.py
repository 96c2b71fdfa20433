"""Structured logging: key=value (or JSON) lines carrying conversation and turn ids when known."""

from __future__ import annotations

import json
import logging
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


def configure_logging(level: str = "INFO", as_json: bool = False) -> None:
    handler = logging.StreamHandler()
    handler.addFilter(_ContextFilter())
    handler.setFormatter(
        _JsonFormatter() if as_json else _TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("httpx", "httpcore", "rq.worker", "rq.scheduler", "aiogram"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))

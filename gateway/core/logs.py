"""Structured logging: key=value (or JSON) lines carrying conversation and turn ids when known."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

turn_context: ContextVar[dict[str, str] | None] = ContextVar("turn_context", default=None)
# Maskers for the log records made in this context (a channel connection's vendor call: its errors may
# echo the connection's credentials, which no setting lists for the formatter below to mask).
_masks: ContextVar[tuple[Callable[[str], str], ...]] = ContextVar("log_masks", default=())


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
            data["exc"] = record.exc_text or self.formatException(record.exc_info)
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


@contextmanager
def masked_in_logs(mask: Callable[[str], str]) -> Iterator[None]:
    """Every log record made in this context, and in tasks started from it, leaves through ``mask``
    (its message, arguments and traceback), whichever logger makes it and whoever handles it."""
    install_log_masking()
    token = _masks.set((*_masks.get(), mask))
    try:
        yield
    finally:
        _masks.reset(token)


def _masked(text: str, masks: tuple[Callable[[str], str], ...]) -> str:
    for mask in masks:
        text = mask(text)
    return text


def install_log_masking() -> None:
    """Wrap logging's record factory once: records made inside ``masked_in_logs`` are masked as made."""
    made = logging.getLogRecordFactory()
    if getattr(made, "masking", False):
        return

    def factory(*args, **kwargs) -> logging.LogRecord:
        record = made(*args, **kwargs)
        masks = _masks.get()
        if masks:
            try:
                message = record.getMessage()
            except (TypeError, ValueError):  # a broken format: the handler reports it, as without masking
                message = None
            if message is not None and (clean := _masked(message, masks)) != message:
                record.msg, record.args = clean, ()
            if record.exc_info and record.exc_info[1] is not None:
                text = logging.Formatter().formatException(record.exc_info)
                if (clean := _masked(text, masks)) != text:
                    record.exc_text = clean  # what every formatter prints instead of formatting it again
        return record

    factory.masking = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


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
    """Client libraries log every request with its full URL (keys in query strings included; Twilio's
    carry the account SID) at INFO and their wire traffic at DEBUG: they log warnings and worse only."""
    for noisy in ("httpx", "httpx2", "httpcore", "rq.worker", "rq.scheduler", "aiogram", "twilio"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, level))

"""Text that can always be encoded: lone UTF-16 surrogates repaired to U+FFFD.

JSON allows ``"\\ud800"`` escapes, so a decoded string may hold a surrogate with no partner (a
browser that cut an emoji in half, a data source with a bug). Python keeps it, but it cannot be
encoded as UTF-8: stored, it breaks every later write, render and LLM request that touches it.
Requests to our API that carry one are refused at the edge; text that comes from systems we call
(data sources, vendor payloads, the language model) and text already stored is repaired here.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["REPLACEMENT", "has_lone_surrogate", "scrub", "scrub_deep"]

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_lone_surrogate(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def scrub(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (the same object when there is none)."""
    return _SURROGATE.sub(REPLACEMENT, text) if _SURROGATE.search(text) else text


def scrub_deep(value: Any) -> Any:
    """``scrub`` applied to every string (keys included) inside JSON-like data."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub_deep(k): scrub_deep(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_deep(v) for v in value]
    return value
